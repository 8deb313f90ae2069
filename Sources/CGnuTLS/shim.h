// GnuTLS's X.509 reader, for the web server's certificate: its dates, read when the settings
// are (GnuTLS itself is the library libmicrohttpd speaks TLS through).
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
