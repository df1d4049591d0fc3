// SPDX-License-Identifier: Apache-2.0
// The layer probe (tests/CMakeLists.txt, layer_probe.*): compiled with exactly the include
// directories of one library target, it includes one public header named by
// STORMGUARD_PROBE_HEADER. A header of the library itself must compile (the control: a broken
// command line cannot pass for a rejection); a header of a library the target does not link must
// not be found, so that a forbidden include fails the build rather than a script.
#include STORMGUARD_PROBE_HEADER
