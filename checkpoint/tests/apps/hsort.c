/* A hybrid sort: quicksort (median of three, Hoare partition) that hands
 * partitions of at most CUTOFF elements to insertion sort. CUTOFF is the
 * tuning knob: on random data a small one wins (insertion sort is quadratic),
 * on nearly sorted data a large one (insertion sort is then linear and every
 * partitioning level it replaces is a full pass). tdg's checkpoint tests
 * build the application with it and time it as a candidate on the image. */
#ifndef CUTOFF
#define CUTOFF 16
#endif

static void insertion_sort(long *a, long lo, long hi)
{
    for (long i = lo + 1; i <= hi; i++) {
        long v = a[i], j = i - 1;
        while (j >= lo && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}

static void swap(long *a, long i, long j)
{
    long t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static long median_of_three(long *a, long lo, long hi)
{
    long mid = lo + (hi - lo) / 2;
    if (a[mid] < a[lo])
        swap(a, mid, lo);
    if (a[hi] < a[lo])
        swap(a, hi, lo);
    if (a[hi] < a[mid])
        swap(a, hi, mid);
    return a[mid];
}

static void quick(long *a, long lo, long hi)
{
    while (hi - lo + 1 > CUTOFF && hi - lo >= 2) {
        long pivot = median_of_three(a, lo, hi), i = lo - 1, j = hi + 1;
        for (;;) {
            do
                i++;
            while (a[i] < pivot);
            do
                j--;
            while (a[j] > pivot);
            if (i >= j)
                break;
            swap(a, i, j);
        }
        /* Recurse on the smaller side, loop on the larger: stack depth log n. */
        if (j - lo < hi - j) {
            quick(a, lo, j);
            lo = j + 1;
        } else {
            quick(a, j + 1, hi);
            hi = j;
        }
    }
    insertion_sort(a, lo, hi);
}

void hsort(long *A, const int N)
{
    quick(A, 0, (long)N - 1);
}
