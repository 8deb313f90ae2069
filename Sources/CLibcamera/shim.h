// libcamera's C++ headers, for the vigil-libcamera plugin (Sources/VigilLibcamera) only: nothing
// the vigil binary links includes them.
#include <libcamera/libcamera.h>
