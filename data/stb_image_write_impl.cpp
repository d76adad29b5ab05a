// The one stb_image_write implementation of the library (export_images and the tests use it through it).
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>
