#ifndef CX264_SHIM_H
#define CX264_SHIM_H
// x264.h needs the fixed-width integer types declared first.
#include <stdint.h>
#include <x264.h>

// `x264_encoder_open` is a macro naming the versioned symbol (x264_encoder_open_164):
// Swift cannot call a macro, so expose it as a function.
static inline x264_t *CX264_encoder_open(x264_param_t *param) {
    return x264_encoder_open(param);
}

static inline int CX264_build(void) { return X264_BUILD; }
#endif
