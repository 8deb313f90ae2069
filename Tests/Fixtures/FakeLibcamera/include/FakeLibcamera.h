// The fake exports one C symbol, declared in Sources/CLibcameraPlugin/vigil_libcamera.h.
