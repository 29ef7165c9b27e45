/* Insertion sort: linear on nearly-sorted input, quadratic on random input.
 * The data-sensitive routine of the checkpoint tests (and of specs/isort). */
void isort(long *a, int n)
{
    for (int i = 1; i < n; i++) {
        long v = a[i];
        int j = i - 1;
        while (j >= 0 && a[j] > v) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = v;
    }
}
