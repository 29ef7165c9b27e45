/* The original routine: insertion sort, in a shared library the program
 * links. On the nearly sorted data the program passes it does a few
 * steps per element; on random data, n*n/4. */
void isort(long *a, int n) {
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
