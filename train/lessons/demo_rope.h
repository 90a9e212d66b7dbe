// Demo `rope`: the RoPE score depends only on the distance, and why RoPE needs many frequencies.
//
//   1. <R_i x, R_j y> depends only on j - i. For random float64 x, y (Dh = 64, base 10000) the demo
//      rotates both with the framework's apply_rope (nn/relative_positions.h) to every position
//      in {0..63} and {1000..1063}, takes the dot product of every (i, j) pair, and groups the
//      pairs by j - i: inside a group the values agree to rounding (~1e-13), across groups they
//      differ. Each group's value is also checked against the closed form
//      s(m) = sum_k (x0 y0 + x1 y1) cos(m theta_k) + (x1 y0 - x0 y1) sin(m theta_k), pair k.
//   2. One frequency collides, all of them do not. A single rotating pair with theta = 2 pi / 2048
//      (apply_rope with Dh = 4 and base (2048 / 2 pi)^2, so theta_1 = 2 pi / 2048; x and y are
//      zero on pair 0) turns a full circle every 2048 positions: distance m and m + 2048 give the
//      same score, and distance 2048 is a perfect copy of distance 0. With all 32 frequencies of a
//      Dh = 64 head no far distance (64..4096) comes even as close to distance 0 as distance 1
//      does: the fast pairs never all come round together, and the slowest pair
//      (theta_31 = 10000^(-62/64)) needs about 47,000 positions for one turn.
//
// "Gap" of a distance m: |R_m u - u| / |u| for u = (1, 0, 1, 0, ...), i.e. the root mean square over
// the pairs k of |e^(i m theta_k) - 1|, how far the rotation by m moves a vector (0 = R_m is the
// identity, so distance m looks exactly like distance 0 to every query and key). Computed from
// apply_rope's own output.
#pragma once

#include <cstdint>
#include <vector>

namespace sf::lessons {

// What the rope demo computes (and its test checks).
struct RopeDemoResult {
  // ---- part 1: the score depends only on j - i
  std::int64_t head_dim = 64;           // Dh of part 1 and of the "all frequencies" curve
  double base = 10000;                  // RoPE base
  std::int64_t pairs = 0;               // (i, j) pairs compared
  std::int64_t offsets = 0;             // distinct j - i
  std::int64_t shared_offsets = 0;      // offsets reached by two or more pairs
  double max_spread = 0;                // max over offsets of (max - min) of <R_i x, R_j y> within it
  double max_closed_form_error = 0;     // max |<R_i x, R_j y> - s(j - i)|
  double across_offsets_min = 0;        // the smallest and largest score over all offsets
  double across_offsets_max = 0;
  struct Group {
    std::int64_t offset = 0, count = 0;  // j - i, and how many (i, j) pairs have it
    double value = 0, spread = 0;        // the first pair's score; max - min in the group
  };
  std::vector<Group> examples;          // a few offsets to print (0, 1, 7, 63, 1000, -1000, ...)

  // ---- part 2: collisions (distances 0..max_distance, scores normalised by |x| |y|)
  std::int64_t period = 2048;           // the single frequency's period in positions
  std::int64_t max_distance = 4096;
  std::vector<double> one_frequency;    // [m]: <x, R_m y> / (|x||y|), one pair, theta = 2 pi / period
  std::vector<double> all_frequencies;  // [m]: the same for a Dh = 64 head, base 10000
  double one_periodicity_error = 0;     // max over m of |score(m) - score(m + period)|, one frequency
  double all_periodicity_diff = 0;      // the same for all frequencies (large: not periodic)
  struct Gaps {
    double neighbour_gap = 0;           // gap(1): how far distance 1 is from distance 0
    std::int64_t closest_far = 0;       // argmin of gap(m) over the far distances kRopeFarFrom..max_distance
    double closest_far_gap = 0;         // gap there: ~0 is a collision
    double gap_at_period = 0;           // gap(period)
  };
  Gaps one, all;                        // one frequency; all frequencies
  double slowest_period = 0;            // 2 pi / theta_31 for Dh 64, base 10000 (positions)
  double fastest_period = 0;            // 2 pi / theta_0 = 2 pi

  // spread and closed form within kRopeSameOffsetTolerance, offsets that differ, the single
  // frequency's collision at its period, and no far collision for all frequencies
  bool claim_holds = false;
};

// Scores differing by at most this within one offset are "the same": the dot product of two
// 64-dim vectors of norm ~8 after rotations by angles up to ~1000 rad (each cos/sin correct to
// ~1e-16 relative, the angle itself to ~1e-13) agrees to ~1e-13; 1e-10 leaves a wide margin
// and is still 10 orders below the differences between offsets.
inline constexpr double kRopeSameOffsetTolerance = 1e-10;
// A gap below this is a collision: the single frequency's theta = 2 pi / 2048 is exact to ~1e-16
// relative, so after 2048 positions it is home to ~1e-12.
inline constexpr double kRopeCollisionTolerance = 1e-9;
// "Far" distances start here. Distances just above 0 are close to 0 by continuity (every pair has
// turned only a little); a collision is a FAR distance that looks like 0. The claim for all
// frequencies: every far distance is further from 0 than distance 1 is (gap(m) > gap(1)); for one
// frequency, distance 2048 is a perfect copy of 0 (gap ~ 0 < gap(1)).
inline constexpr std::int64_t kRopeFarFrom = 64;

// Runs both parts from `seed` (x and y are N(0,1) float64 draws).
RopeDemoResult compute_rope_demo(std::uint64_t seed);

}  // namespace sf::lessons
