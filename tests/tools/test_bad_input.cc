// Bad input to every user-facing command (docs/errors.md): one table, one test. Each row is a
// shell command run against the real binary (TESSERA_BIN_DIR/tessera), the exit status it must
// give (2 for bad input; 1 for a chip fault and 3 for the watchdog, which happen at run time),
// a substring of its stderr that names the place (file, byte offset, line, PC, cycle), and a
// file or folder of the case's that must come through untouched: byte for byte, no file added
// or removed (a run folder's .lock aside: tessera train takes it before it reads the folder's
// logs). The inputs are made once in a temp dir: a small dataset (the test set under the
// training names too) and its damaged copies, a short run's checkpoint and its damaged copies,
// programs, traces and vector files. TESSERA_BAD_INPUT_TABLE=FILE writes the table with each
// case's real first line of stderr as Markdown (docs/errors.md is made from it).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/checkpoint.h"

namespace {

namespace fs = std::filesystem;

const std::string kTessera = std::string(TESSERA_BIN_DIR) + "/tessera";
const std::string kPython = "/usr/bin/python3";
const std::string kData = "/usr/share/datasets/fashion-mnist";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// One bad input. In `command`, `message` and `keep`, $D is the case folder; `command` starts
// after "tessera ".
struct BadInputCase {
  const char* what;     // the case, for the table
  const char* command;  // tessera's arguments
  int status;           // the exit status it must give
  const char* message;  // a substring of stderr naming the place
  const char* keep;     // a file or folder that must not change ("" none); may be absent
};

// Training runs share these: a short evaluation, the small dataset, the output folder; most
// also run two steps of batch 8 on the functional backend (QUICK).
#define TRAIN "train --no-progress --eval-samples 16 "
#define QUICK "--backend functional --steps 2 --batch 8 "
#define SMALL "--data $D/small "
#define OUT "--out $D/out "

const BadInputCase kCases[] = {
    // ---- tessera train: flags ----
    {"unknown flag", TRAIN QUICK SMALL OUT "--bogus", 2, "--bogus", "out"},
    {"value out of range", TRAIN SMALL OUT "--backend functional --batch 5000", 2,
     "--batch: Value 5000 not in range 1 to 4096", "out"},
    {"not a number", TRAIN QUICK SMALL OUT "--seed abc", 2, "Could not convert: --seed = abc",
     "out"},
    {"unknown backend", TRAIN "--backend tpu " SMALL OUT, 2, "--backend: tpu not in", "out"},
    {"--epochs 0", TRAIN SMALL OUT "--backend functional --epochs 0", 2,
     "--epochs 0 (and no --steps): nothing to train", "out"},
    {"--sample-every 0", TRAIN "--backend sampled --sample-every 0 " SMALL OUT, 2,
     "--sample-every must be at least 1", "out"},
    {"array the rtl chip is not built for", TRAIN SMALL OUT "--backend rtl --array 12 --batch 8", 2,
     "the rtl backend is built for array sizes 4 and 16 (and 128 after make chip128), not 12",
     "out"},
    {"batch too large for the chip", TRAIN SMALL OUT "--backend rtl --array 4 --batch 512", 2,
     "at a batch of 512 a chip exceed the chip's 268435456-byte HBM; use a smaller batch", "out"},
    {"batch not divisible by the chips", TRAIN QUICK SMALL OUT "--chips 3", 2,
     "the global batch 8 is not a positive multiple of the 3 replicas", "out"},
    {"--arith host on a chip without that build",
     TRAIN SMALL OUT "--backend rtl --array 4 --batch 8 --arith host", 2, "--arith host", "out"},
    {"--out is a file", TRAIN QUICK SMALL "--out $D/a_file", 2,
     "$D/a_file: exists and is not a directory", "a_file"},
    // ---- tessera train: dataset files ----
    {"no such data folder", TRAIN QUICK OUT "--data $D/nonexistent", 2,
     "$D/nonexistent/train-images-idx3-ubyte(.gz): cannot open", "out"},
    {"a dataset file missing", TRAIN QUICK OUT "--data $D/data_missing", 2,
     "neither train-labels-idx1-ubyte nor train-labels-idx1-ubyte.gz exists in $D/data_missing",
     "out"},
    {"gzip file truncated", TRAIN QUICK OUT "--data $D/data_gztrunc", 2,
     "$D/data_gztrunc/train-labels-idx1-ubyte.gz: gzip: unexpected end of compressed data (file "
     "truncated) at compressed offset 0x",
     "out"},
    {"gzip file corrupt", TRAIN QUICK OUT "--data $D/data_gzcorrupt", 2,
     "$D/data_gzcorrupt/train-labels-idx1-ubyte.gz: gzip: incorrect data check at compressed "
     "offset 0x",
     "out"},
    {"wrong IDX magic", TRAIN QUICK OUT "--data $D/data_magic", 2,
     "$D/data_magic/train-images-idx3-ubyte: offset 0x0: bad magic 0x12 0x34", "out"},
    {"wrong IDX element type", TRAIN QUICK OUT "--data $D/data_type", 2,
     "$D/data_type/train-labels-idx1-ubyte: offset 0x2: element type 0x09", "out"},
    {"images file with 1 dimension", TRAIN QUICK OUT "--data $D/data_ndims", 2,
     "$D/data_ndims/train-images-idx3-ubyte: offset 0x3: images need 3 dimensions", "out"},
    {"images of the wrong size", TRAIN QUICK OUT "--data $D/data_dims", 2,
     "$D/data_dims/train-images-idx3-ubyte: offset 0x8: images are 32x32, the model takes 28x28",
     "out"},
    {"images file truncated", TRAIN QUICK OUT "--data $D/data_imgtrunc", 2,
     "$D/data_imgtrunc/train-images-idx3-ubyte: offset 0x779d28: truncated payload: shape "
     "10000x28x28 needs 7840000 bytes",
     "out"},
    {"label count != image count", TRAIN QUICK OUT "--data $D/data_count", 2,
     "$D/data_count/train-labels-idx1-ubyte: offset 0x4: 9999 labels for 10000 images", "out"},
    {"label out of range", TRAIN QUICK OUT "--data $D/data_range", 2,
     "$D/data_range/train-labels-idx1-ubyte: offset 0x6c: label 10 of sample 100 is not in 0..9",
     "out"},
    {"trailing bytes after the labels", TRAIN QUICK OUT "--data $D/data_trail", 2,
     "$D/data_trail/train-labels-idx1-ubyte: offset 0x2718: 2 trailing bytes", "out"},
    {"empty labels file", TRAIN QUICK OUT "--data $D/data_empty", 2,
     "$D/data_empty/train-labels-idx1-ubyte: offset 0x0: truncated header: 0 of 4 bytes", "out"},
    // ---- tessera train: checkpoints (--resume) ----
    {"no checkpoint", TRAIN QUICK SMALL OUT "--seed 1 --resume $D/nothere.tsr", 2,
     "checkpoint $D/nothere.tsr: cannot open: No such file or directory", "out"},
    {"not a checkpoint", TRAIN QUICK SMALL OUT "--seed 1 --resume $D/garbage.tsr", 2,
     "checkpoint $D/garbage.tsr: bad magic at offset 0", "garbage.tsr"},
    {"checkpoint truncated", TRAIN QUICK SMALL OUT "--seed 1 --resume $D/truncated.tsr", 2,
     "checkpoint $D/truncated.tsr: truncated: expected", "truncated.tsr"},
    {"checkpoint with a bad CRC", TRAIN QUICK SMALL OUT "--seed 1 --resume $D/badcrc.tsr", 2,
     "checkpoint $D/badcrc.tsr: checksum mismatch: the CRC-32C at offset", "badcrc.tsr"},
    {"checkpoint of another version", TRAIN QUICK SMALL OUT "--seed 1 --resume $D/version.tsr", 2,
     "checkpoint $D/version.tsr: unsupported version 2 at offset 8", "version.tsr"},
    {"bytes after the checkpoint's CRC", TRAIN QUICK SMALL OUT "--seed 1 --resume $D/trailing.tsr",
     2, "checkpoint $D/trailing.tsr: trailing bytes", "trailing.tsr"},
    {"checkpoint of another model (batch 16)",
     TRAIN "--backend functional --steps 4 --batch 16 " SMALL OUT "--seed 1 --resume $D/good", 2,
     "checkpoint $D/good/checkpoint/ckpt.tsr: checkpoint is for model", "good"},
    {"checkpoint of another seed", TRAIN QUICK SMALL OUT "--seed 2 --resume $D/good", 2,
     "checkpoint $D/good/checkpoint/ckpt.tsr was written with --seed 1, this run has --seed 2",
     "good"},
    {"checkpoint past the run's steps",
     TRAIN "--backend functional --steps 1 --batch 8 " SMALL OUT "--seed 1 --resume $D/good", 2,
     "the checkpoint is at step 2, past this run's 1 steps", "good"},
    {"resume in place: metrics.csv of another run",
     TRAIN SMALL
     "--backend functional --batch 8 --seed 1 --steps 4 --resume $D/header --out $D/header",
     2, "$D/header/metrics.csv: line 1: header is 'step,loss'", "header"},
    {"resume in place: metrics.csv rows missing",
     TRAIN SMALL "--backend functional --batch 8 --seed 1 --steps 4 --resume $D/rows --out $D/rows",
     2, "$D/rows/metrics.csv: its rows end at step 0, the checkpoint is at step 2", "rows"},
    {"resume in place: event file damaged",
     TRAIN SMALL
     "--backend functional --batch 8 --seed 1 --steps 4 --resume $D/events --out $D/events",
     2, "record 0 at byte 0: torn or damaged file_version event", "events"},
    // ---- tessera train / compile: model description files ----
    {"model file missing", TRAIN QUICK SMALL OUT "--model $D/nomodel.json", 2,
     "$D/nomodel.json: cannot open the model file", "out"},
    {"model file not JSON", TRAIN QUICK SMALL OUT "--model $D/model_syntax.json", 2,
     "$D/model_syntax.json:3:1: not JSON", "out"},
    {"model file: unknown layer class", TRAIN QUICK SMALL OUT "--model $D/model_lstm.json", 2,
     "$D/model_lstm.json: layers[2] (LSTM): unknown layer class", "out"},
    {"model file: argument out of range", TRAIN QUICK SMALL OUT "--model $D/model_kernel.json", 2,
     "$D/model_kernel.json: layers[0] (Conv2D): 'kernel_size' must be an integer from 1 to 7, "
     "not 11",
     "out"},
    {"model the compiler does not lower", TRAIN QUICK SMALL OUT "--model $D/model_convdrop.json",
     2, "$D/model_convdrop.json: compile: layer 2 (Dropout): before Flatten only Conv2D, "
     "MaxPool2D and AveragePooling2D are lowered", "out"},
    {"Dense stack with a layer not lowered", TRAIN QUICK SMALL OUT "--model $D/model_drop.json",
     2, "$D/model_drop.json: compile: layer 1 (Dropout): Dropout is lowered after a hidden relu",
     "out"},
    {"Dense stack: checkpoint of another recipe (lr)",
     TRAIN QUICK SMALL OUT "--model $D/model_mlp.json --seed 1 --lr 0.002 --resume $D/mlp_good",
     2, "checkpoint $D/mlp_good/checkpoint/ckpt.tsr: checkpoint is for model", "out"},
    {"Dense stack: the example CNN's checkpoint",
     TRAIN QUICK SMALL OUT "--model $D/model_mlp.json --seed 1 --resume $D/good", 2,
     "checkpoint $D/good/checkpoint/ckpt.tsr: checkpoint is for model", "out"},
    {"Dense stack: checkpoint of another seed",
     TRAIN QUICK SMALL OUT "--model $D/model_mlp.json --seed 2 --resume $D/mlp_good", 2,
     "checkpoint $D/mlp_good/checkpoint/ckpt.tsr was written with --seed 1, this run has --seed 2",
     "out"},
    {"Dense stack: checkpoint with a bad CRC",
     TRAIN QUICK SMALL OUT "--model $D/model_mlp.json --seed 1 --resume $D/mlp_badcrc.tsr", 2,
     "checkpoint $D/mlp_badcrc.tsr: checksum mismatch: the CRC-32C at offset", "mlp_badcrc.tsr"},
    {"Dense stack: checkpoint past the run's steps",
     TRAIN "--backend functional --steps 1 --batch 8 " SMALL OUT
     "--model $D/model_mlp.json --seed 1 --resume $D/mlp_good",
     2, "the checkpoint is at step 2, past this run's 1 steps", "out"},
    {"evaluate: no weights export", "evaluate $D/nothere --model $D/model_mlp.json " SMALL, 2,
     "$D/nothere/manifest.json: cannot open", ""},
    {"evaluate: weights of another model",
     "evaluate $D/mlp_good/weights --model $D/model_mlp24.json " SMALL, 2,
     "$D/mlp_good/weights/manifest.json: layers[0] (Dense): activation 'softmax', the model's is "
     "'relu'", "mlp_good"},
    {"evaluate: tensor file truncated", "evaluate $D/w_trunc --model $D/model_mlp.json " SMALL, 2,
     "$D/w_trunc/dense0_kernel.f32: 1000 bytes, its shape [784,10] needs 31360", "w_trunc"},
    {"model for other images than the data's", TRAIN QUICK SMALL OUT "--model $D/model_32.json",
     2, "$D/small/train-images-idx3-ubyte.gz: offset 0x8: images are 28x28, the model takes 32x32",
     "out"},
    {"compile: model file not lowered", "compile --model $D/model_convdrop.json", 2,
     "tessera compile: $D/model_convdrop.json: compile: layer 2 (Dropout): before Flatten only",
     ""},
    {"compile: Dense stack not lowered", "compile --model $D/model_drop.json", 2,
     "tessera compile: $D/model_drop.json: compile: layer 1 (Dropout): Dropout is lowered after",
     ""},
    // ---- tessera run ----
    {"illegal instruction (rtl)", "run $D/illegal.bin --backend rtl --dump 0x0:16=$D/dump.bin", 1,
     "chip fault ILLEGAL_INSTRUCTION at pc 0xf000000 (address 0x0, info 0xffffffff) at cycle ",
     "dump.bin"},
    {"illegal instruction (functional)", "run $D/illegal.bin --backend functional", 1,
     "chip fault ILLEGAL_INSTRUCTION at pc 0xf000000", ""},
    {"DMA address outside HBM", "run $D/dma_range.s --backend rtl", 1,
     "chip fault DMA at pc 0xf000020 (address 0xfffffff0, info 0x1) at cycle ", ""},
    {"program fetched from a misaligned address",
     "run $D/ok.s --backend functional --prog-addr 0x3", 1, "chip fault FETCH_RANGE at pc 0x3", ""},
    {"sync deadlock", "run $D/deadlock.s --backend rtl", 1,
     "chip fault SYNC_DEADLOCK at pc 0xf000010 (address 0x0, info 0x0) at cycle ", ""},
    {"program reads accumulator rows never written (rtl)",
     "run $D/acc_unwritten.s --backend rtl --dump 0x0:16=$D/dump.bin", 1,
     "RTL assertion failed at cycle ", "dump.bin"},
    {"long program hits the watchdog (functional)",
     "run $D/long.s --backend functional --timeout 2000", 3,
     "no HALT after 2000 instructions (functional backend); next instruction at pc 0xf000010", ""},
    {"hung program hits the watchdog", "run $D/hang.s --backend rtl --timeout 2000", 3,
     "no HALT after 2000 cycles; decode at pc 0xf000050; DMA: queued busy ; MXU: idle; VPU: "
     "queued held by a WAIT",
     ""},
    {"program not a multiple of 16 bytes", "run $D/odd.bin", 2,
     "$D/odd.bin: 17 bytes is not a whole number of 16-byte instructions", ""},
    {"empty program", "run $D/empty.bin", 2,
     "$D/empty.bin: 0 bytes is not a whole number of 16-byte instructions", ""},
    {"no such program", "run $D/nothere.bin", 2,
     "$D/nothere.bin: cannot read the program: No such file or directory", ""},
    {"assembly error in the program", "run $D/syntax.s", 2, "$D/syntax.s:2:8: expected a kind", ""},
    {"--load outside HBM", "run $D/ok.s --load 0x10000000000=$D/ok.s", 2,
     "HBM access of 5 bytes at 0x10000000000 is outside the HBM", ""},
    {"--load of a missing file", "run $D/ok.s --load 0x100=$D/nothere.bin", 2,
     "--load '0x100=$D/nothere.bin': $D/nothere.bin: cannot read: No such file or directory", ""},
    {"--dump without a file", "run $D/ok.s --dump 0x0:16", 2,
     "--dump '0x0:16': expected ADDR:BYTES=FILE", ""},
    // ---- tessera asm / disasm ----
    {"unknown mnemonic", "asm $D/unknown.s -o $D/prog.bin", 2,
     "$D/unknown.s:2:1: unknown mnemonic 'foo'", "prog.bin"},
    {"syntax error: bad operand", "asm $D/syntax.s -o $D/prog.bin", 2,
     "$D/syntax.s:2:8: expected a kind f32|bf16|acc, got 'f33'", "prog.bin"},
    {"immediate out of range", "asm $D/immediate.s -o $D/prog.bin", 2,
     "$D/immediate.s:1:16: stride must be in -2147483648..4294967295, got '99999999999'",
     "prog.bin"},
    {"operand missing", "asm $D/operands.s -o $D/prog.bin", 2,
     "$D/operands.s:2:1: wait expects 3 or 4 operands", "prog.bin"},
    {"extra operand", "asm $D/extra.s -o $D/prog.bin", 2,
     "$D/extra.s:1:6: halt takes 0 operands (), extra operand '5'", "prog.bin"},
    {"no such source", "asm $D/nothere.s -o $D/prog.bin", 2,
     "$D/nothere.s: cannot read the file: No such file or directory", "prog.bin"},
    {"disasm: size not a multiple of 16", "disasm $D/odd.bin", 2,
     "$D/odd.bin: size 17 bytes is not a multiple of 16", ""},
    {"disasm: unknown opcode", "disasm $D/illegal.bin", 2,
     "$D/illegal.bin: offset 0x0: unknown opcode 0xff", ""},
    // ---- tessera hbm-replay ----
    {"trace: unknown command", "hbm-replay $D/command.trace --cmd-trace $D/cmd.txt", 2,
     "$D/command.trace:2: unknown command 'FETCH' (expected READ or WRITE)", "cmd.txt"},
    {"trace: address not hex", "hbm-replay $D/address.trace", 2,
     "$D/address.trace:2: address 'zz' is not hexadecimal", ""},
    {"trace: cycles decrease", "hbm-replay $D/cycles.trace", 2,
     "$D/cycles.trace:2: cycle 5 is before cycle 10 of line 1", ""},
    {"trace: a field missing", "hbm-replay $D/fields.trace", 2,
     "$D/fields.trace:1: expected 3 fields", ""},
    {"trace: misaligned address", "hbm-replay $D/aligned.trace", 2,
     "$D/aligned.trace:1: address 0x101 is not aligned to the request size (32 bytes)", ""},
    {"trace: no such file", "hbm-replay $D/nothere.trace", 2,
     "hbm-replay: cannot open trace $D/nothere.trace", ""},
    {"unsupported --channels", "hbm-replay $D/ok.trace --channels 3", 2,
     "--channels 3 is not supported", ""},
    {"unsupported --request-bytes", "hbm-replay $D/ok.trace --request-bytes 33", 2,
     "--request-bytes 33 is not supported", ""},
    // ---- tessera fpu-check ----
    {"vectors: not hex", "fpu-check --op add $D/hex.tv", 2,
     "$D/hex.tv: line 2: '3f80000g' is not hexadecimal", ""},
    {"vectors: too few words", "fpu-check --op add $D/words.tv", 2,
     "$D/words.tv: line 1: expected 2 operand(s), a result and optional flags, got 2 words", ""},
    {"vectors: word wider than 32 bits", "fpu-check --op add $D/wide.tv", 2,
     "$D/wide.tv: line 1: '140000000' is not a 32-bit hex word", ""},
    {"vectors: no such file", "fpu-check --op add $D/nothere.tv", 2,
     "fpu-check: cannot open '$D/nothere.tv'", ""},
    {"vectors: no case", "fpu-check --op add $D/empty.tv", 2,
     "fpu-check: '$D/empty.tv' holds no test case (only blank or comment lines)", ""},
    {"unknown --op", "fpu-check --op pow $D/hex.tv", 2, "--op: pow not in", ""},
    // ---- tessera report ----
    {"report: not a run folder", "report $D/small", 2, "$D/small is not a run folder", ""},
};

#undef TRAIN
#undef QUICK
#undef SMALL
#undef OUT

// Every file under `path` (or `path` itself) and its bytes; .lock files left out.
std::map<std::string, std::string> snapshot(const std::string& path) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    out[path] = read_file(path);
  } else if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file() && e.path().filename() != ".lock")
        out[e.path().string()] = read_file(e.path().string());
      else if (e.is_directory())
        out[e.path().string() + "/"] = "";
  }
  return out;
}

class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/tessera_test_bad_input.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
    dir_ = tmpl;
    ASSERT_TRUE(fs::exists(kPython)) << kPython << " is missing: apt-get install python3";
    ASSERT_TRUE(fs::exists(kData + "/t10k-images-idx3-ubyte.gz"))
        << "the dataset is missing: apt-get install dataset-fashion-mnist";
    // The datasets: `small` is the test set under both names; each damaged copy changes one file.
    const std::string py = R"PY(
import gzip, os, struct, sys
D, S = sys.argv[1], sys.argv[2]
names = ['train-images-idx3-ubyte', 'train-labels-idx1-ubyte',
         't10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte']
src = lambda n: S + '/' + n.replace('train-', 't10k-') + '.gz'
def make(case, name=None, data=None, gz=None):
    d = D + '/' + case
    os.makedirs(d)
    for n in names:
        if n != name:
            os.symlink(src(n), d + '/' + n + '.gz')
    if gz is not None:
        open(d + '/' + name + '.gz', 'wb').write(gz)
    elif data is not None:
        open(d + '/' + name, 'wb').write(data)
img = gzip.open(src('train-images-idx3-ubyte')).read()
lbl = gzip.open(src('train-labels-idx1-ubyte')).read()
lgz = open(src('train-labels-idx1-ubyte'), 'rb').read()
make('small')
make('data_missing', 'train-labels-idx1-ubyte')
make('data_gztrunc', 'train-labels-idx1-ubyte', gz=lgz[:len(lgz) // 2])
bad = bytearray(lgz); bad[len(bad) // 2] ^= 0xff
make('data_gzcorrupt', 'train-labels-idx1-ubyte', gz=bytes(bad))
make('data_magic', 'train-images-idx3-ubyte', b'\x12\x34' + img[2:])
make('data_type', 'train-labels-idx1-ubyte', b'\x00\x00\x09\x01' + lbl[4:])
make('data_ndims', 'train-images-idx3-ubyte', lbl)
make('data_dims', 'train-images-idx3-ubyte', img[:8] + struct.pack('>II', 32, 32) +
     img[16:] + bytes(10000 * (32 * 32 - 28 * 28)))
make('data_imgtrunc', 'train-images-idx3-ubyte', img[:-1000])
make('data_count', 'train-labels-idx1-ubyte', lbl[:4] + struct.pack('>I', 9999) + lbl[8:-1])
l = bytearray(lbl); l[8 + 100] = 10
make('data_range', 'train-labels-idx1-ubyte', bytes(l))
make('data_trail', 'train-labels-idx1-ubyte', lbl + b'xx')
make('data_empty', 'train-labels-idx1-ubyte', b'')
)PY";
    write_file(dir_ + "/make_data.py", py);
    ASSERT_EQ(std::system((kPython + " " + dir_ + "/make_data.py " + dir_ + " " + kData).c_str()),
              0);

    // A short run: its checkpoint and damaged copies of it, and folders to resume in place
    // whose logs do not fit.
    const std::string good = dir_ + "/good";
    ASSERT_EQ(std::system((kTessera +
                           " train --no-progress --eval-samples 16 --backend "
                           "functional --steps 2 --batch 8 --seed 1 --data " +
                           dir_ + "/small --out " + good + " >/dev/null 2>&1")
                              .c_str()),
              0);
    const std::string ckpt = read_file(good + "/checkpoint/ckpt.tsr");
    ASSERT_GT(ckpt.size(), 100u);
    write_file(dir_ + "/garbage.tsr", "garbage\n");
    write_file(dir_ + "/model_syntax.json", "{\"layers\": [\n  {\"class_name\": \"Flatten\"}\n");
    const std::string conv = R"({"class_name": "Conv2D", "filters": 8, "kernel_size": 3,
        "activation": "relu"}, {"class_name": "MaxPool2D"}, )";
    const std::string head = R"({"class_name": "Flatten"}, {"class_name": "Dense", "units": 10,
        "activation": "softmax"}]})";
    write_file(dir_ + "/model_lstm.json", R"({"input_shape": [28, 28, 1], "layers": [)" + conv +
                                              R"({"class_name": "LSTM"}, )" + head);
    write_file(dir_ + "/model_kernel.json",
               R"({"input_shape": [28, 28, 1], "layers": [{"class_name": "Conv2D",
                   "filters": 8, "kernel_size": 11}, {"class_name": "MaxPool2D"}, )" + head);
    write_file(dir_ + "/model_mlp.json", R"({"input_shape": [28, 28, 1], "layers": [)" + head);
    write_file(dir_ + "/model_convdrop.json",
               R"({"input_shape": [28, 28, 1], "layers": [)" + conv +
                   R"({"class_name": "Dropout", "rate": 0.3}, )" + head);
    write_file(dir_ + "/model_drop.json", R"({"input_shape": [28, 28, 1], "layers": [
        {"class_name": "Flatten"}, {"class_name": "Dropout", "rate": 0.2},
        {"class_name": "Dense", "units": 16, "activation": "relu"},
        {"class_name": "Dense", "units": 10, "activation": "softmax"}]})");
    write_file(dir_ + "/model_32.json", R"({"input_shape": [32, 32, 1], "layers": [)" + conv + head);
    // A Dense stack's short run and a damaged copy of its checkpoint.
    const std::string mlp_good = dir_ + "/mlp_good";
    ASSERT_EQ(std::system((kTessera + " train --no-progress --eval-samples 16 --backend functional "
                                      "--steps 2 --batch 8 --seed 1 --model " +
                           dir_ + "/model_mlp.json --data " + dir_ + "/small --out " + mlp_good +
                           " >/dev/null 2>&1")
                              .c_str()),
              0);
    std::string mlp_ckpt = read_file(mlp_good + "/checkpoint/ckpt.tsr");
    ASSERT_GT(mlp_ckpt.size(), 100u);
    mlp_ckpt[mlp_ckpt.size() - tessera::runlog::kCheckpointCrcBytes - 40] ^= 0x10;
    write_file(dir_ + "/mlp_badcrc.tsr", mlp_ckpt);
    write_file(dir_ + "/model_mlp24.json", R"({"input_shape": [28, 28, 1], "layers": [
        {"class_name": "Flatten"}, {"class_name": "Dense", "units": 24, "activation": "relu"},
        {"class_name": "Dense", "units": 10, "activation": "softmax"}]})");
    fs::copy(mlp_good + "/weights", dir_ + "/w_trunc");
    write_file(dir_ + "/w_trunc/dense0_kernel.f32",
               read_file(mlp_good + "/weights/dense0_kernel.f32").substr(0, 1000));
    write_file(dir_ + "/truncated.tsr", ckpt.substr(0, ckpt.size() / 2));
    std::string badcrc = ckpt;
    badcrc[badcrc.size() - tessera::runlog::kCheckpointCrcBytes - 40] ^= 0x10;
    write_file(dir_ + "/badcrc.tsr", badcrc);
    std::string version = ckpt;
    version[8] = 2;
    write_file(dir_ + "/version.tsr", version);
    write_file(dir_ + "/trailing.tsr", ckpt + "xyz");
    for (const char* f : {"header", "rows", "events"})
      fs::copy(good, dir_ + "/" + f, fs::copy_options::recursive);
    write_file(dir_ + "/header/metrics.csv", "step,loss\n0,2.3\n1,2.2\n");
    const std::string metrics = read_file(good + "/metrics.csv");
    write_file(dir_ + "/rows/metrics.csv",
               metrics.substr(0, metrics.find('\n', metrics.find('\n') + 1) + 1));
    for (const auto& e : fs::directory_iterator(dir_ + "/events"))
      if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0)
        write_file(e.path().string(), "not a TFRecord");

    // An output folder that a refused run must leave alone, a file in the way of --out.
    fs::create_directories(dir_ + "/out/checkpoint");
    write_file(dir_ + "/out/metrics.csv", "step,loss,accuracy\n0,1,0\n");
    write_file(dir_ + "/out/summary.json", "{}\n");
    write_file(dir_ + "/out/checkpoint/ckpt.tsr", ckpt);
    write_file(dir_ + "/a_file", "not a folder\n");

    // tessera run / asm / disasm
    write_file(dir_ + "/ok.s", "halt\n");
    write_file(dir_ + "/illegal.bin", std::string(16, '\xff'));
    write_file(dir_ + "/odd.bin", std::string(17, '\0'));
    write_file(dir_ + "/empty.bin", "");
    write_file(dir_ + "/dump.bin", "an earlier dump\n");
    write_file(dir_ + "/prog.bin", std::string(16, '\0'));  // an earlier image: kept
    write_file(dir_ + "/dma_range.s",
               "dma.loop src, 0, 8, 4, 1, 0\ndma.loop dst, 0, 8, 4, 1, 0\n"
               "dma.copy hbm, ub, 4, 0xfffffff0, 0x0\nhalt\n");
    write_file(dir_ + "/deadlock.s", "nop\nwait vpu, sc0, 1\nhalt\n");
    // The DMA walks 32000 strided elements (one a cycle) while the VPU waits for its signal.
    write_file(dir_ + "/hang.s",
               "dma.loop src, 0, 4000, 64, 8, 2\ndma.loop dst, 0, 4000, 2, 8, 8000\n"
               "dma.copy hbm, ub, 2, 0x10000, 0x0\nsignal dma, sc0\nwait vpu, sc0, 1\nhalt\n");
    write_file(dir_ + "/acc_unwritten.s", "vpu.ld acc, v1, 5\nhalt\n");  // ACC row 5: never written
    write_file(dir_ + "/long.s", "repeat 60000, 1\nnop\nhalt\n");  // 60,002 instructions
    write_file(dir_ + "/unknown.s", "nop\nfoo v1\nhalt\n");
    write_file(dir_ + "/syntax.s", "nop\nvpu.ld f33, v1, 0\n");
    write_file(dir_ + "/immediate.s", "mxu.ldw 0x100, 99999999999\nhalt\n");
    write_file(dir_ + "/operands.s", "nop\nwait vpu, sc0\nhalt\n");
    write_file(dir_ + "/extra.s", "halt 5\n");
    // hbm-replay
    write_file(dir_ + "/ok.trace", "0x100 READ 0\n");
    write_file(dir_ + "/cmd.txt", "an earlier command trace\n");
    write_file(dir_ + "/command.trace", "0x100 READ 0\n0x200 FETCH 5\n");
    write_file(dir_ + "/address.trace", "0x100 READ 0\nzz READ 5\n");
    write_file(dir_ + "/cycles.trace", "0x100 READ 10\n0x200 READ 5\n");
    write_file(dir_ + "/fields.trace", "0x100 READ\n");
    write_file(dir_ + "/aligned.trace", "0x101 READ 1\n");
    // fpu-check
    write_file(dir_ + "/hex.tv", "3f800000 3f800000 40000000 00\n3f80000g 3f800000 40000000 00\n");
    write_file(dir_ + "/words.tv", "3f800000 3f800000\n");
    write_file(dir_ + "/empty.tv", "# vectors for add\n\n");
    write_file(dir_ + "/wide.tv", "3f800000 3f800000 140000000 00\n");
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    if (!kept_) fs::remove_all(dir_, ec);
  }

  static std::string dir_;
  static bool kept_;
};
std::string BadInput::dir_;
bool BadInput::kept_ = false;

// The first line of `text` that holds `needle`, else its first line.
std::string line_with(const std::string& text, const std::string& needle) {
  std::stringstream ss(text);
  std::string line, first;
  while (std::getline(ss, line)) {
    if (first.empty()) first = line;
    if (line.find(needle) != std::string::npos) return line;
  }
  return first;
}

TEST_F(BadInput, EveryCaseGetsItsStatusAMessageNamingThePlaceAndOverwritesNothing) {
  ASSERT_GE(std::size(kCases), 30u);
  std::string table =
      "| # | case | command | exit | message | untouched |\n|---|---|---|---|---|---|\n";
  int n = 0;
  for (const BadInputCase& c : kCases) {
    ++n;
    const std::string cmd = replace_all(c.command, "$D", dir_);
    const std::string want = replace_all(c.message, "$D", dir_);
    const std::string keep = *c.keep ? dir_ + "/" + c.keep : std::string();
    SCOPED_TRACE(std::to_string(n) + ": " + c.what + ": tessera " + cmd);
    const auto before = keep.empty() ? std::map<std::string, std::string>() : snapshot(keep);
    const std::string out = dir_ + "/case.out", err = dir_ + "/case.err";
    const int rc = std::system((kTessera + " " + cmd + " >" + out + " 2>" + err).c_str());
    const int status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    const std::string stderr_text = read_file(err);
    EXPECT_EQ(status, c.status) << stderr_text;
    EXPECT_NE(stderr_text.find(want), std::string::npos)
        << "stderr lacks: " << want << "\nstderr: " << stderr_text;
    if (!keep.empty()) {
      const auto after = snapshot(keep);
      std::string changed;
      for (const auto& [f, bytes] : before) {
        const auto it = after.find(f);
        if (it == after.end())
          changed += " " + f + " (removed)";
        else if (it->second != bytes)
          changed += " " + f + " (changed)";
      }
      for (const auto& [f, bytes] : after)
        if (!before.count(f)) changed += " " + f + " (added)";
      EXPECT_TRUE(changed.empty()) << "the case's output was touched:" << changed;
    }
    // The table for docs/errors.md: $D shown as DIR, the real first line of the message.
    std::string shown = replace_all(line_with(stderr_text, want), dir_, "DIR");
    shown = replace_all(shown, "|", "\\|");
    table += "| " + std::to_string(n) + " | " + c.what + " | `tessera " +
             replace_all(replace_all(c.command, "$D", "DIR"), "|", "\\|") + "` | " +
             std::to_string(status) + " | `" + shown + "` | " +
             (*c.keep ? std::string("`DIR/") + c.keep + "`" : std::string("—")) + " |\n";
  }
  if (HasFailure()) {
    kept_ = true;
    std::fprintf(stderr, "kept %s\n", dir_.c_str());
  }
  if (const char* path = std::getenv("TESSERA_BAD_INPUT_TABLE")) write_file(path, table);
  std::printf("%d bad-input cases\n", n);
}

}  // namespace
