// fuzz_checkpoint: the checkpoint reader (sw/runlog/checkpoint.cc, decode_checkpoint: what
// load_checkpoint runs on a file's bytes) on arbitrary bytes, twice: as a whole file (magic,
// version, length, CRC-32C, then the payload), and as a payload inside a correct header and
// CRC, so that mutations reach the payload parser past the checksum.
// Properties: a CheckpointError names the checkpoint ("checkpoint NAME: ..."); a checkpoint
// that loads encodes to exactly the bytes it was read from. Any other exception, a sanitizer
// report or a huge allocation (a length or count field believed) is a finding.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "sw/runlog/file_util.h"
#include "tessera/checkpoint.h"
#include "tessera/crc32c.h"

namespace {

namespace rl = tessera::runlog;

// The signature make_seeds writes; any other one is refused after the whole payload is read.
const std::string kSignature = "fuzz-model n=4";
const std::string kName = "fuzz.tsr";

void check(const std::string& bytes) {
  try {
    const rl::Checkpoint c = rl::decode_checkpoint(bytes, kName, kSignature);
    FUZZ_CHECK(rl::encode_checkpoint(c) == bytes, "a loaded checkpoint encodes to other bytes");
  } catch (const rl::CheckpointError& e) {
    FUZZ_CHECK(starts_with(e.what(), "checkpoint " + kName + ": "), e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check(input);
  std::string file(rl::kCheckpointMagic, 8);
  rl::put_le(file, rl::kCheckpointVersion, 4);
  rl::put_le(file, input.size(), 8);
  file += input;
  rl::put_le(file, rl::crc32c(file.data(), file.size()), 4);
  check(file);
  return 0;
}
