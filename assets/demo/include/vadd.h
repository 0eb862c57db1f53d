/* Host API of the demo libraries. */
int launch_vadd(const float *a, const float *b, float *c, int n);
int launch_saxpy(float a, const float *x, float *y, int n);
