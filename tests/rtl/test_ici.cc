// The ICI link port (rtl/ici/tpu_ici_port.sv): two chips' ports joined by a wire that delays
// every flit and every credit by the link latency, as the multi-chip harness will. Full duplex
// traffic under random offers and random back-pressure arrives complete and in order and the
// credits all come home; the throughput is the link's bandwidth (one 40-byte flit every 3 cycles
// at 16 bytes a cycle) when the credits cover the round trip, and credits per round trip
// (2 x latency + 2 cycles) when they do not. An overflowing receive buffer would trip the port's
// assertion (the test would abort).
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "Vtpu_ici_port.h"
#include "Vtpu_ici_port_c2.h"
#include "harness/sim_ctrl.h"
#include "tessera/chip_params.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kFlitWords = chip_params::FlitW / 32;  // a flit as 32-bit words
using Flit = std::array<uint32_t, kFlitWords>;

template <class Model>
class Link {
 public:
  Link(int latency, const std::string& wave) : latency_(latency), a_(wave), b_("") {
    for (auto* s : {&a_, &b_}) {
      auto& m = s->top();
      m.flit_valid_i = 0;
      m.credit_i = 0;
      m.link_valid_i = 0;
      m.rx_ready_i = 0;
      s->reset();
    }
  }

  // One cycle. offer[i]: chip i offers `next[i]`; ready[i]: chip i takes a received flit.
  // Returns which offers were taken; received flits are appended to got[i].
  std::array<bool, 2> cycle(const std::array<bool, 2>& offer, const std::array<Flit, 2>& next,
                            const std::array<bool, 2>& ready,
                            std::array<std::vector<Flit>, 2>& got) {
    SimCtrl<Model>* s[2] = {&a_, &b_};
    std::array<bool, 2> taken{};
    for (int i = 0; i < 2; ++i) {
      auto& m = s[i]->top();
      const Wire& in = wire_[1 - i].size() == static_cast<size_t>(latency_)
                           ? wire_[1 - i].front()
                           : kIdle;  // what the other chip sent `latency` cycles ago
      m.link_valid_i = in.valid;
      for (int w = 0; w < kFlitWords; ++w) m.link_flit_i[w] = in.flit[w];
      m.credit_i = in.credit;
      m.flit_valid_i = offer[i];
      for (int w = 0; w < kFlitWords; ++w) m.flit_i[w] = next[i][w];
      m.rx_ready_i = ready[i];
      s[i]->eval();
      taken[i] = m.flit_valid_i && m.flit_ready_o;
      if (m.rx_valid_o && m.rx_ready_i) {
        Flit f;
        for (int w = 0; w < kFlitWords; ++w) f[w] = m.rx_flit_o[w];
        got[i].push_back(f);
      }
    }
    for (int i = 0; i < 2; ++i) s[i]->tick();
    for (int i = 0; i < 2; ++i) {
      auto& m = s[i]->top();
      Wire out;
      out.valid = m.link_valid_o;
      for (int w = 0; w < kFlitWords; ++w) out.flit[w] = m.link_flit_o[w];
      out.credit = m.credit_o;
      if (wire_[i].size() == static_cast<size_t>(latency_)) wire_[i].pop_front();
      wire_[i].push_back(out);
    }
    return taken;
  }
  uint32_t credits(int i) { return (i ? b_ : a_).top().credits_o; }

 private:
  struct Wire {
    bool valid = false, credit = false;
    Flit flit{};
  };
  static inline const Wire kIdle{};
  int latency_;
  SimCtrl<Model> a_, b_;
  std::deque<Wire> wire_[2];  // wire_[i]: from chip i, oldest first
};

Flit make_flit(uint32_t seq, std::mt19937& rng) {
  Flit f;
  f[0] = seq;
  for (int w = 1; w < kFlitWords; ++w) f[w] = rng();
  return f;
}

TEST(IciLink, FlitsArriveInOrderUnderRandomBackPressure) {
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  Link<Vtpu_ici_port> link(7, test::current_test_name());
  std::array<std::vector<Flit>, 2> sent, got;
  std::array<uint32_t, 2> seq{};
  std::array<Flit, 2> next = {make_flit(0, rng), make_flit(0x80000000u, rng)};
  for (int c = 0; c < 6000; ++c) {
    const bool draining = c >= 5000;  // the last 1000 cycles: no new offers, consumers ready
    std::array<bool, 2> offer{}, ready{};
    for (int i = 0; i < 2; ++i) {
      offer[i] = !draining && rng() % 100 < (i ? 40u : 90u);
      ready[i] = draining || rng() % 100 < (i ? 70u : 25u);
    }
    const auto taken = link.cycle(offer, next, ready, got);
    for (int i = 0; i < 2; ++i)
      if (taken[i]) {
        sent[i].push_back(next[i]);
        next[i] = make_flit(++seq[i] | (i ? 0x80000000u : 0), rng);
      }
  }
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("from chip " + std::to_string(i));
    EXPECT_GT(sent[i].size(), 300u);
    ASSERT_EQ(got[1 - i].size(), sent[i].size()) << "flits lost or duplicated";
    for (size_t k = 0; k < sent[i].size(); ++k)
      ASSERT_EQ(got[1 - i][k], sent[i][k]) << "flit " << k;
    EXPECT_EQ(link.credits(i), 8u) << "every credit came home";
  }
}

// Always offering, always ready: flits per cycle over a long window.
template <class Model>
double throughput(int latency) {
  std::mt19937 rng(1);
  Link<Model> link(latency, "");
  std::array<std::vector<Flit>, 2> got;
  std::array<Flit, 2> next = {make_flit(0, rng), make_flit(0, rng)};
  uint64_t taken = 0;
  const int warm = 200, window = 6000;
  for (int c = 0; c < warm + window; ++c) {
    const auto t = link.cycle({true, false}, next, {true, true}, got);
    if (t[0] && c >= warm) ++taken;
  }
  return double(taken) / window;
}

TEST(IciLink, ThroughputIsTheLinkBandwidthWhenCreditsCoverTheRoundTrip) {
  // 40-byte flits on 16 bytes a cycle: 3 cycles a flit; 8 credits cover a round trip of
  // 2 x 2 + 2 = 6 cycles many times over.
  const double r = throughput<Vtpu_ici_port>(2);
  std::printf("latency 2, 8 credits: %.4f flits/cycle (link bound 1/3)\n", r);
  EXPECT_NEAR(r, 1.0 / 3, 0.002);
}

TEST(IciLink, ThroughputIsCreditsPerRoundTripOtherwise) {
  // 2 credits, latency 20: a credit comes back 2 x 20 + 2 cycles after its flit was taken.
  const double r = throughput<Vtpu_ici_port_c2>(20);
  std::printf("latency 20, 2 credits: %.4f flits/cycle (credit bound 2/42)\n", r);
  EXPECT_NEAR(r, 2.0 / 42, 0.001);
}

}  // namespace
}  // namespace tessera
