/* Arch-neutral stand-in so UAPI headers build for -target bpf without the
 * host multiarch include directory. */
#include <asm-generic/types.h>
