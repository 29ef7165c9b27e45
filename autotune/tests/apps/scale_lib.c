/* The original routine, in a shared library the program links. */
void scale(double *x, int n, double a) {
    for (int i = 0; i < n; i++)
        x[i] *= a;
}
