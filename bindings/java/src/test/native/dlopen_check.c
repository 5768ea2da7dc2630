/* Loads libkiln_jni.so as a JVM would (dlopen, RTLD_NOW: every symbol resolved at once, the static
 * initializers run) and checks what it exports: the JNI entry points, and none of kiln's own symbols.
 * Usage: dlopen_check LIBRARY */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  const char* wanted[] = {"JNI_OnLoad", "Java_ai_kiln_Native_sessionRun", "Java_ai_kiln_Native_modelLoad"};
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; ++i) {
    if (dlsym(lib, wanted[i]) == NULL) {
      fprintf(stderr, "%s is not exported\n", wanted[i]);
      return 1;
    }
  }
  if (dlsym(lib, "kiln_version") != NULL) {
    fprintf(stderr, "kiln_version is exported: kiln's symbols should stay inside\n");
    return 1;
  }
  dlclose(lib);
  printf("dlopen_check: %s loads and exports the JNI entry points only\n", argv[1]);
  return 0;
}
