// The one stb_image implementation of the library. Only the formats we accept are compiled in (smaller attack
// surface); files are read by data/image_io.cpp, so stb's stdio layer is not needed.
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#include <stb/stb_image.h>
