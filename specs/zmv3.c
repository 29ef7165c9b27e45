/* c[s] = a[s] * b[s] for 3x3 complex (row-major) matrices and 3-vectors,
 * written out in real arithmetic the way MILC's mult_su3_mat_vec is. */
#include <complex.h>

void zmv3(const int sites, const double _Complex *a, const double _Complex *b, double _Complex *c)
{
    int s, i;
    for (s = 0; s < sites; s++) {
        const double _Complex *m = a + 9 * s, *v = b + 3 * s;
        double _Complex *r = c + 3 * s;
        for (i = 0; i < 3; i++) {
            double re = 0.0, im = 0.0;
            int j;
            for (j = 0; j < 3; j++) {
                const double ar = creal(m[3 * i + j]), ai = cimag(m[3 * i + j]);
                const double br = creal(v[j]), bi = cimag(v[j]);
                re += ar * br - ai * bi;
                im += ar * bi + ai * br;
            }
            r[i] = re + im * I;
        }
    }
}
