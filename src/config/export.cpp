// SPDX-License-Identifier: Apache-2.0
// `policy export`: the one entry that picks the target's writer (export_envoy.cpp,
// export_grpc.cpp, export_linkerd.cpp). The targets' names are in export_format.cpp, which the
// writers call.
#include "stormguard/config/export.hpp"

namespace stormguard::config {

exported_policy export_policy(const policy& p, export_target target) {
  switch (target) {
    case export_target::grpc:
      return export_grpc(p);
    case export_target::linkerd:
      return export_linkerd(p);
    case export_target::envoy:
      break;
  }
  return export_envoy(p);
}

}  // namespace stormguard::config
