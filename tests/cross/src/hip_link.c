/* Link-time stand-in for libamdhip64.so.5 (soname only): the executables get their
   DT_NEEDED entry from it. The tests load them with tests/oracle/hip_stub.cpp, built
   for the same machine, which does what CLR does at registration. */
void **__hipRegisterFatBinary(const void *w) { (void)w; return 0; }
void __hipUnregisterFatBinary(void **h) { (void)h; }
void __hipRegisterFunction(void) {}
int __hipPushCallConfiguration(void) { return 0; }
int __hipPopCallConfiguration(void) { return 0; }
int hipLaunchKernel(void) { return 0; }
int hipGetLastError(void) { return 0; }
