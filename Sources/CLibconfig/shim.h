#ifndef CLIBCONFIG_SHIM_H
#define CLIBCONFIG_SHIM_H
#include <libconfig.h>

// libconfig's error accessors are macros over the struct's fields.
static inline const char *CLibconfig_error_text(const config_t *c) { return config_error_text(c); }
static inline const char *CLibconfig_error_file(const config_t *c) { return config_error_file(c); }
static inline int CLibconfig_error_line(const config_t *c) { return config_error_line(c); }
static inline int CLibconfig_setting_source_line(const config_setting_t *s) { return config_setting_source_line(s); }
#endif
