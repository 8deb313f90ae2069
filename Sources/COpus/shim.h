#include <opus.h>

// opus_encoder_ctl is variadic, which Swift cannot call: one function per request used.

/// The encoder's lookahead in samples at 48 kHz: what a decoder skips at the start (PreSkip).
static inline int vigil_opus_lookahead(OpusEncoder *encoder, opus_int32 *samples) {
    return opus_encoder_ctl(encoder, OPUS_GET_LOOKAHEAD(samples));
}

/// Sets the bit rate in bits per second.
static inline int vigil_opus_set_bitrate(OpusEncoder *encoder, opus_int32 bitsPerSecond) {
    return opus_encoder_ctl(encoder, OPUS_SET_BITRATE(bitsPerSecond));
}

/// Sets the computational complexity, 0 (cheapest) to 10 (best).
static inline int vigil_opus_set_complexity(OpusEncoder *encoder, opus_int32 complexity) {
    return opus_encoder_ctl(encoder, OPUS_SET_COMPLEXITY(complexity));
}
