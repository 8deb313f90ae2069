#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call: one function
// per type of argument used.

static inline CURLcode vigil_curl_set_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}

static inline CURLcode vigil_curl_set_offset(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}

/// A string option (libcurl copies it) or a pointer (CURLOPT_READDATA, CURLOPT_HTTPHEADER).
static inline CURLcode vigil_curl_set_pointer(CURL *curl, CURLoption option, const void *value) {
    return curl_easy_setopt(curl, option, value);
}

/// The function that gives libcurl the bytes to send, and the one it hands received bytes to
/// (the response's body or its header lines): both have this type.
typedef size_t (*vigil_curl_data_function)(char *buffer, size_t size, size_t count, void *context);

static inline CURLcode vigil_curl_set_function(CURL *curl, CURLoption option, vigil_curl_data_function function) {
    return curl_easy_setopt(curl, option, function);
}

static inline CURLcode vigil_curl_get_long(CURL *curl, CURLINFO info, long *value) {
    return curl_easy_getinfo(curl, info, value);
}

static inline CURLcode vigil_curl_get_offset(CURL *curl, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(curl, info, value);
}

/// How far a transfer is; its function may end the transfer by returning non-zero.
static inline CURLcode vigil_curl_set_progress(CURL *curl, curl_xferinfo_callback function) {
    return curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, function);
}

/// Where the body should be read from next (a request sent again: after a 401, a redirect).
static inline CURLcode vigil_curl_set_seek(CURL *curl, curl_seek_callback function) {
    return curl_easy_setopt(curl, CURLOPT_SEEKFUNCTION, function);
}

/// CURLAUTH_ANY, a macro Swift does not import: every HTTP sign-in scheme the server offers.
static const unsigned long vigil_curl_auth_any = CURLAUTH_ANY;
