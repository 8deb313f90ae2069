#ifndef CLIBCONFIG_SHIM_H
#define CLIBCONFIG_SHIM_H
#include <libconfig.h>

// libconfig's accessors for errors and setting metadata are macros over struct fields;
// Swift cannot call macros, so these wrap them.
static inline const char *CLibconfig_error_text(const config_t *c) { return config_error_text(c); }
static inline const char *CLibconfig_error_file(const config_t *c) { return config_error_file(c); }
static inline int CLibconfig_error_line(const config_t *c) { return config_error_line(c); }
static inline int CLibconfig_error_type(const config_t *c) { return (int)config_error_type(c); }
static inline config_setting_t *CLibconfig_root_setting(const config_t *c) { return config_root_setting(c); }
static inline int CLibconfig_setting_type(const config_setting_t *s) { return config_setting_type(s); }
static inline const char *CLibconfig_setting_name(const config_setting_t *s) { return config_setting_name(s); }
static inline int CLibconfig_setting_source_line(const config_setting_t *s) { return config_setting_source_line(s); }
static inline const char *CLibconfig_setting_source_file(const config_setting_t *s) { return config_setting_source_file(s); }
#endif
