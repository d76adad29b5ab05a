// data/augment_launch.h in a build without CUDA: there is no kernel to launch.
#include "data/augment_launch.h"
#include "runtime/error.h"

namespace liftoff::cuda {

void launch_augment(const AugmentLaunch&, const Stream&) {
  throw DeviceError("the CUDA augmentation: this Liftoff was built without CUDA; use --augment cpu");
}

}  // namespace liftoff::cuda
