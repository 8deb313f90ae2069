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

// x264 logs through `pf_log`, a callback taking a `va_list`: a Swift closure cannot portably
// be one (on aarch64 the compiler crashes on it), so the shim formats each line and hands it
// to `line` with `context`.
#include <stdarg.h>
#include <stdio.h>

typedef struct CX264_log_target {
    void (*line)(void *context, int level, const char *text);
    void *context;
} CX264_log_target;

static inline void CX264_log(void *target, int level, const char *format, va_list arguments) {
    char text[1024];
    if (vsnprintf(text, sizeof text, format, arguments) <= 0) return;
    const CX264_log_target *t = (const CX264_log_target *)target;
    t->line(t->context, level, text);
}

// Sends the log lines of the encoder opened with `param` to `target`, which must outlive it.
static inline void CX264_param_set_log(x264_param_t *param, CX264_log_target *target) {
    param->pf_log = CX264_log;
    param->p_log_private = target;
}
#endif
