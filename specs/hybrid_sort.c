/* Sorts N unsigned 32-bit keys: OUT = IN sorted, TMP scratch. A hybrid
 * sort whose cut-offs are chosen at compile time, so `tdg tune` can search
 * them (see specs/hybrid_sort.spec):
 *   BITS    digit of the most-significant-digit radix passes: each pass
 *           splits a bucket by the next BITS bits (a histogram, then a
 *           scatter through TMP); 0 sorts by comparisons alone. Wide digits
 *           make few passes but histograms that outgrow L1 and scatters to
 *           more places than the store buffers and TLB track;
 *   SWITCH  a bucket of fewer keys goes to the comparison sort instead of
 *           another radix pass (a pass costs about as much for 10 keys as
 *           for 2^BITS);
 *   ALGO    the comparison sort: 0 quicksort (median of three, Hoare's
 *           partition, smaller side first), 1 merge sort (top-down,
 *           alternating between the bucket and its part of TMP);
 *   CUTOFF  runs of fewer keys are finished by insertion sort, whose
 *           quadratic cost beats the comparison sort's overhead only while
 *           the run fits a few cache lines.
 * Every positive SWITCH and CUTOFF, ALGO 0 or 1 and BITS from 0 to 16 sort
 * correctly. */

#include <limits.h>
#include <string.h>

#ifndef BITS
#define BITS 8
#endif
#ifndef SWITCH
#define SWITCH 256
#endif
#ifndef ALGO
#define ALGO 0
#endif
#ifndef CUTOFF
#define CUTOFF 16
#endif

#if BITS < 0 || BITS > 16
#error "BITS must be 0 (no radix passes) to 16"
#endif
#if SWITCH < 1 || CUTOFF < 1
#error "SWITCH and CUTOFF must be positive"
#endif
#if ALGO != 0 && ALGO != 1
#error "ALGO must be 0 (quicksort) or 1 (merge sort)"
#endif

typedef unsigned int key;

enum { KEY_BITS = (int)(sizeof(key) * CHAR_BIT) };

static void insertion(key *a, long n)
{
    long i, j;
    for (i = 1; i < n; i++) {
        const key v = a[i];
        for (j = i; j > 0 && a[j - 1] > v; j--)
            a[j] = a[j - 1];
        a[j] = v;
    }
}

#if ALGO == 0
static void swap(key *a, long i, long j)
{
    const key t = a[i];
    a[i] = a[j];
    a[j] = t;
}

/* Quicksort down to runs below CUTOFF. The pivot is the median of the
 * first, middle and last keys, left in the middle: Hoare's partition with
 * the lower middle key (index (n - 1) / 2) as pivot splits n >= 2 keys into
 * two non-empty parts, so every round makes progress even on equal keys
 * (the upper middle would leave n = 2 unsplit). The smaller part is
 * sorted first (recursion depth below log2 n), the larger by the loop. */
static void quick(key *a, long n)
{
    while (n > 1 && n >= CUTOFF) {
        const long m = (n - 1) / 2;
        long i = -1, j = n;
        key p;
        if (a[m] < a[0])
            swap(a, m, 0);
        if (a[n - 1] < a[m]) {
            swap(a, n - 1, m);
            if (a[m] < a[0])
                swap(a, m, 0);
        }
        p = a[m];
        for (;;) {
            do
                i++;
            while (a[i] < p);
            do
                j--;
            while (a[j] > p);
            if (i >= j)
                break;
            swap(a, i, j);
        }
        /* a[0..j] <= p <= a[j+1..n) */
        if (j + 1 < n - j - 1) {
            quick(a, j + 1);
            a += j + 1;
            n -= j + 1;
        } else {
            quick(a + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    insertion(a, n);
}
#else
/* Merges sorted a[0..na) and b[0..nb) into out, stably. */
static void merge(const key *a, long na, const key *b, long nb, key *out)
{
    long i = 0, j = 0, k = 0;
    while (i < na && j < nb)
        out[k++] = b[j] < a[i] ? b[j++] : a[i++];
    memcpy(out + k, a + i, (size_t)(na - i) * sizeof *a);
    memcpy(out + k + (na - i), b + j, (size_t)(nb - j) * sizeof *b);
}

static void merge_into(key *a, key *t, long n);

/* Sorts a[0..n) in place, with t[0..n) as scratch: the halves are sorted
 * into t, then merged back, so no key is copied without being merged. */
static void merge_sort(key *a, key *t, long n)
{
    long h;
    if (n < 2 || n < CUTOFF) {
        insertion(a, n);
        return;
    }
    h = n / 2;
    merge_into(a, t, h);
    merge_into(a + h, t + h, n - h);
    merge(t, h, t + h, n - h, a);
}

/* Sorts the keys of a[0..n) into t[0..n), a serving as scratch. */
static void merge_into(key *a, key *t, long n)
{
    long h;
    if (n < 2 || n < CUTOFF) {
        insertion(a, n);
        memcpy(t, a, (size_t)n * sizeof *a);
        return;
    }
    h = n / 2;
    merge_sort(a, t, h);
    merge_sort(a + h, t + h, n - h);
    merge(a, h, a + h, n - h, t);
}
#endif

/* The comparison sort of a bucket a[0..n), t[0..n) its scratch. */
static void compare_sort(key *a, key *t, long n)
{
#if ALGO == 0
    (void)t;
    quick(a, n);
#else
    merge_sort(a, t, n);
#endif
}

#if BITS > 0
/* Sorts a[0..n), whose keys agree above bit `top`, by the bits below it:
 * the next digit's histogram, a scatter into t by digit, copied back; then
 * each bucket by the following digit, or by comparisons below SWITCH keys.
 * Recursion depth is at most KEY_BITS / BITS. */
static void radix(key *a, key *t, long n, int top)
{
    const int bits = top < BITS ? top : BITS;
    const int shift = top - bits;
    const key mask = (key)((1u << bits) - 1u);
    const long digits = 1L << bits;
    long count[1L << BITS];
    long d, i, start;
    memset(count, 0, (size_t)digits * sizeof count[0]);
    for (i = 0; i < n; i++)
        count[(a[i] >> shift) & mask]++;
    /* count[d] becomes where digit d's keys start. */
    for (d = 0, start = 0; d < digits; d++) {
        const long c = count[d];
        count[d] = start;
        start += c;
    }
    for (i = 0; i < n; i++)
        t[count[(a[i] >> shift) & mask]++] = a[i];
    memcpy(a, t, (size_t)n * sizeof *a);
    /* count[d] now is where digit d's keys end. */
    for (d = 0, start = 0; d < digits; d++) {
        const long m = count[d] - start;
        if (m > 1 && shift > 0) { /* at shift 0 a bucket's keys are equal */
            if (m < SWITCH)
                compare_sort(a + start, t + start, m);
            else
                radix(a + start, t + start, m, shift);
        }
        start = count[d];
    }
}
#endif

void sort_hybrid(const int N, const unsigned int *IN, unsigned int *OUT, unsigned int *TMP)
{
    const long n = N > 0 ? N : 0;
    memcpy(OUT, IN, (size_t)n * sizeof *OUT);
#if BITS > 0
    if (n >= SWITCH) {
        radix(OUT, TMP, n, KEY_BITS);
        return;
    }
#endif
    compare_sort(OUT, TMP, n);
}
