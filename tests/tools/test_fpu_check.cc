// `tessera fpu-check`: vector files written here from the host's IEEE arithmetic replay through
// the RTL (tpu_fpu; tpu_fp_divsqrt for div and sqrt) with no mismatch; a wrong expected value is
// reported with its line and both values; malformed files are rejected with line numbers before any
// case runs; the exit codes.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sw/numerics/fp_ref.h"
#include "sw/tools/fpu_check.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using tools::FpuOp;

class FpuCheck : public ::testing::Test {
 protected:
  FpuCheck() {
    dir_ = fs::temp_directory_path() / ("tessera_fpu_check_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  ~FpuCheck() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  int run(FpuOp op, const std::string& path) {
    out_.str("");
    err_.str("");
    return tools::run_fpu_check(op, path, out_, err_);
  }
  fs::path dir_;
  std::ostringstream out_, err_;
};

TEST_F(FpuCheck, ReferenceVectorsPassForEveryOp) {
  test::Fp32Gen g32(test::test_seed());
  test::Bf16Gen g16(test::test_seed() + 1);
  std::ostringstream add, mul, f2bf, bf2f;
  add << "# a b expected flags\n";
  for (int i = 0; i < 5000; ++i) {
    const uint32_t a = g32(), b = g32();
    add << fp::hex32(a) << " " << fp::hex32(b) << " " << fp::hex32(fp::add(a, b)) << " 00\n";
    const uint16_t x = g16(), y = g16();
    mul << fp::hex16(x) << " " << fp::hex16(y) << " " << fp::hex32(fp::bf16_mul(x, y)) << "\n";
    f2bf << fp::hex32(a) << " " << fp::hex16(fp::fp32_to_bf16(a)) << " 01\n";
    bf2f << fp::hex16(x) << " " << fp::hex32(fp::bf16_to_fp32(x)) << "\n";
  }
  EXPECT_EQ(run(FpuOp::kAdd, write("add.tv", add.str())), 0) << out_.str() << err_.str();
  EXPECT_NE(out_.str().find("5000 cases, 0 mismatches"), std::string::npos) << out_.str();
  EXPECT_EQ(run(FpuOp::kBf16Mul, write("mul.tv", mul.str())), 0) << out_.str();
  EXPECT_EQ(run(FpuOp::kFp32ToBf16, write("f2bf.tv", f2bf.str())), 0) << out_.str();
  EXPECT_EQ(run(FpuOp::kBf16ToFp32, write("bf2f.tv", bf2f.str())), 0) << out_.str();
}

TEST_F(FpuCheck, ReferenceVectorsPassForMulDivSqrt) {
  // fp32 mul through tpu_fpu, div and sqrt through the iterative tpu_fp_divsqrt.
  test::Fp32Gen g(test::test_seed());
  std::ostringstream mul, div, sqrt;
  mul << "# a b expected flags\n";
  for (int i = 0; i < 2000; ++i) {
    const uint32_t a = g(), b = g();
    mul << fp::hex32(a) << " " << fp::hex32(b) << " " << fp::hex32(fp::mul(a, b)) << " 00\n";
    div << fp::hex32(a) << " " << fp::hex32(b) << " " << fp::hex32(fp::div(a, b)) << "\n";
    sqrt << fp::hex32(a) << " " << fp::hex32(fp::sqrt(a)) << " 01\n";
  }
  EXPECT_EQ(run(FpuOp::kMul, write("fmul.tv", mul.str())), 0) << out_.str() << err_.str();
  EXPECT_NE(out_.str().find("fpu-check mul"), std::string::npos) << out_.str();
  EXPECT_NE(out_.str().find("2000 cases, 0 mismatches"), std::string::npos) << out_.str();
  EXPECT_EQ(run(FpuOp::kDiv, write("div.tv", div.str())), 0) << out_.str() << err_.str();
  EXPECT_NE(out_.str().find("2000 cases, 0 mismatches"), std::string::npos) << out_.str();
  EXPECT_EQ(run(FpuOp::kSqrt, write("sqrt.tv", sqrt.str())), 0) << out_.str() << err_.str();
  EXPECT_NE(out_.str().find("2000 cases, 0 mismatches"), std::string::npos) << out_.str();
}

TEST_F(FpuCheck, MulDivSqrtWrongLineIsNamed) {
  // Each file: a few right cases (special ones included), one deliberately wrong line.
  struct Case {
    FpuOp op;
    const char* text;
    const char* report;
  };
  const Case cases[] = {
      {FpuOp::kMul,
       "3fc00000 40000000 40400000\n"     // 1.5 * 2 = 3
       "00800000 3f000000 00400000 00\n"  // min normal / 2: subnormal
       "3f800000 3f800001 3f800002\n"     // wrong: 1 * (1 + ulp) = 3f800001
       "7f800000 00000000 ffc00000\n",    // inf * 0: any NaN expected
       "mismatch line 3: 3f800000 3f800001: expected 3f800002 got 3f800001"},
      {FpuOp::kDiv,
       "40400000 40000000 3fc00000\n"     // 3 / 2
       "bf800000 00000000 ff800000\n"     // -1 / +0 = -inf
       "3f800000 40400000 3eaaaaaa 00\n"  // wrong: 1 / 3 = 3eaaaaab
       "00000000 00000000 7fc00000\n",    // 0 / 0
       "mismatch line 3: 3f800000 40400000: expected 3eaaaaaa got 3eaaaaab"},
      {FpuOp::kSqrt,
       "40800000 40000000\n"  // sqrt 4 = 2
       "# a comment line\n"
       "80000000 80000000\n"      // sqrt -0 = -0
       "40000000 3fb504f4\n"      // wrong: sqrt 2 = 3fb504f3
       "bf800000 7fc00000 00\n",  // sqrt -1 = NaN
       "mismatch line 4: 40000000: expected 3fb504f4 got 3fb504f3"},
  };
  for (const Case& c : cases) {
    const std::string name = std::string(tools::fpu_op_name(c.op));
    EXPECT_EQ(run(c.op, write(name + "_bad.tv", c.text)), 1) << name << ": " << out_.str();
    EXPECT_NE(out_.str().find(c.report), std::string::npos) << name << ": " << out_.str();
    EXPECT_NE(out_.str().find("4 cases, 1 mismatches"), std::string::npos) << out_.str();
  }
}

TEST_F(FpuCheck, MulDivSqrtMalformedLinesExit2) {
  // Two operands for sqrt, one for div, a 9-digit word for mul: nothing runs.
  EXPECT_EQ(run(FpuOp::kSqrt, write("s.tv", "40800000 40000000\n40800000 3f800000 40000000 0 0\n")),
            2);
  EXPECT_NE(err_.str().find("line 2: expected 1 operand(s)"), std::string::npos) << err_.str();
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(run(FpuOp::kDiv, write("d.tv", "3f800000 3f800000\n")), 2);
  EXPECT_NE(err_.str().find("line 1: expected 2 operand(s)"), std::string::npos) << err_.str();
  EXPECT_EQ(run(FpuOp::kMul, write("m.tv", "3f800000 13f800000 3f800000\n")), 2);
  EXPECT_NE(err_.str().find("line 1: '13f800000' is not a 32-bit hex word"), std::string::npos)
      << err_.str();
}

TEST_F(FpuCheck, WrongExpectedValueIsReportedWithLine) {
  const std::string file = write("bad.tv",
                                 "3f800000 40000000 40400000\n"
                                 "3f800000 3f800000 40000001 00\n"  // wrong: 2.0 is 40000000
                                 "7f800000 ff800000 ffc00000\n");   // any NaN expected: ok
  EXPECT_EQ(run(FpuOp::kAdd, file), 1);
  EXPECT_NE(out_.str().find("mismatch line 2: 3f800000 3f800000: expected 40000001 got 40000000"),
            std::string::npos)
      << out_.str();
  EXPECT_NE(out_.str().find("3 cases, 1 mismatches"), std::string::npos) << out_.str();
}

TEST_F(FpuCheck, MalformedLinesStopBeforeAnyCaseRuns) {
  const std::string file = write("malformed.tv",
                                 "3f800000 40000000 40400000\n"
                                 "3f800000 zz 40000000\n"
                                 "3f800000\n"
                                 "123456789 0 0\n");
  EXPECT_EQ(run(FpuOp::kAdd, file), 2);
  const std::string e = err_.str();
  EXPECT_NE(e.find("line 2: 'zz' is not hexadecimal"), std::string::npos) << e;
  EXPECT_NE(e.find("line 3: expected 2 operand(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("line 4: '123456789' is not a 32-bit hex word"), std::string::npos) << e;
  EXPECT_NE(e.find("no case was run"), std::string::npos) << e;
  EXPECT_EQ(out_.str(), "");  // nothing compared
}

TEST_F(FpuCheck, Bf16OperandWiderThan16BitsIsMalformed) {
  EXPECT_EQ(run(FpuOp::kBf16Mul, write("w.tv", "3f800 3f80 3f800000\n")), 2);
  EXPECT_NE(err_.str().find("line 1"), std::string::npos);
}

TEST_F(FpuCheck, AFileWithNoCaseIsAnErrorNotAPass) {
  EXPECT_EQ(run(FpuOp::kAdd, write("empty.tv", "# only a comment\n\n")), 2);
  EXPECT_NE(err_.str().find("holds no test case"), std::string::npos) << err_.str();
  EXPECT_EQ(run(FpuOp::kAdd, write("nothing.tv", "")), 2);
  EXPECT_EQ(out_.str(), "");  // nothing compared, no "0 cases, 0 mismatches"
}

TEST_F(FpuCheck, MissingFileIsAnError) {
  EXPECT_EQ(run(FpuOp::kAdd, (dir_ / "nope.tv").string()), 2);
  EXPECT_NE(err_.str().find("cannot open"), std::string::npos);
}

TEST_F(FpuCheck, CommandLineExitCodes) {
  const std::string bin = std::string(TESSERA_BIN_DIR) + "/tessera";
  const std::string good = write("g.tv", "3f800000 3f800000 40000000\n");
  const std::string bad = write("b.tv", "3f800000 3f800000 40000001\n");
  auto status = [](const std::string& cmd) { return WEXITSTATUS(std::system(cmd.c_str())); };
  EXPECT_EQ(status(bin + " fpu-check --op add " + good + " >/dev/null"), 0);
  EXPECT_EQ(status(bin + " fpu-check --op add " + bad + " >/dev/null"), 1);
  EXPECT_NE(status(bin + " fpu-check --op frob " + good + " >/dev/null 2>&1"), 0);
  for (const char* op : {"mul", "div"}) {
    EXPECT_EQ(status(bin + " fpu-check --op " + op + " " + bad + " >/dev/null"), 1) << op;
  }
  const std::string one = write("one.tv", "3f800000 3f800000\n");  // 1 * 1, 1 / 1, sqrt 1
  EXPECT_EQ(status(bin + " fpu-check --op sqrt " + one + " >/dev/null"), 0);
  EXPECT_EQ(status(bin + " fpu-check --op div " + one + " >/dev/null 2>&1"), 2);  // malformed
}

}  // namespace
}  // namespace tessera
