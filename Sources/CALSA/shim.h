#ifndef CALSA_SHIM_H
#define CALSA_SHIM_H
#include <alsa/asoundlib.h>

// What Swift cannot do with alsa-lib on its own. The *_alloca helpers are macros: Swift
// uses the *_malloc/*_free pairs instead, so nothing here needs alloca.

// alsa-lib prints its own diagnostics to stderr ("ALSA lib pcm.c:2666:(snd_pcm_open_noupdate)
// Unknown PCM ...") through a variadic handler, which Swift cannot define. Vigil reports
// every failing call itself, with what to do, so the library's lines are dropped.
static void CALSA_discardLibraryMessage(const char *file, int line, const char *function, int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}
// snd_lib_error_set_handler only stores the pointer, and always returns 0.
static inline void CALSA_silenceLibraryMessages(void) {
    (void)snd_lib_error_set_handler(CALSA_discardLibraryMessage);
}
#endif
