// The max-pooling GPU kernels' index arithmetic (operators/cuda/max_pool_index.hpp), checked on
// the host: the windows covering an element against a brute force over many geometries, the
// tiles' bounds on shared memory, and the kernels' loops run serially (forward, the fallback
// gradient, and the tiled gradient phase by phase) against the CPU operators bit for bit, on
// inputs full of ties.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/tensor.hpp"
#include "operators/cuda/max_pool_index.hpp"
#include "operators/registry.hpp"
#include "random_tensors.hpp"

using namespace purine;
using namespace purine::cuda;
using purine::testing::random_tensor;
using purine::testing::tied_tensor;

namespace {

struct Case {
  int n, c, h, w, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

MaxPoolShape shape_of(const Case& k) {
  MaxPoolShape s;
  s.planes = int64_t{k.n} * k.c;
  s.h = k.h;
  s.w = k.w;
  s.ho = (k.h + 2 * k.pad_h - k.kernel_h) / k.stride_h + 1;
  s.wo = (k.w + 2 * k.pad_w - k.kernel_w) / k.stride_w + 1;
  s.kernel_h = k.kernel_h;
  s.kernel_w = k.kernel_w;
  s.stride_h = k.stride_h;
  s.stride_w = k.stride_w;
  s.pad_h = k.pad_h;
  s.pad_w = k.pad_w;
  return s;
}

Attrs attrs_of(const Case& k) {
  return Attrs()
      .set("mode", std::string("max"))
      .set("kernel_h", int64_t{k.kernel_h})
      .set("kernel_w", int64_t{k.kernel_w})
      .set("stride_h", int64_t{k.stride_h})
      .set("stride_w", int64_t{k.stride_w})
      .set("pad_h", int64_t{k.pad_h})
      .set("pad_w", int64_t{k.pad_w});
}

// The CPU operator's output.
Tensor run_cpu(const std::string& type, const Attrs& attrs, const std::vector<const Tensor*>& in) {
  std::unique_ptr<Operator> op = OperatorRegistry::create(type, attrs);
  std::vector<Shape> shapes;
  for (const Tensor* t : in) shapes.push_back(t->shape());
  Tensor out(op->infer_shapes(shapes)[0]);
  std::vector<Tensor*> outs{&out};
  OpContext context;
  op->compute(in, outs, context);
  return out;
}

bool same_bits(const std::vector<float>& a, const Tensor& b) {
  return int64_t(a.size()) == b.count() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The tiled gradient kernel's three phases, block by block, thread by thread.
std::vector<float> tiled_gradient(const MaxPoolShape& s, const float* x, const float* dy) {
  const MaxPoolTiling t = max_pool_tiling(s);
  std::vector<float> dx(size_t(s.planes * s.h * s.w), -1.0f);
  std::vector<float> region(size_t(t.region_floats()));
  std::vector<int> argmax(size_t(t.window_count()));
  std::vector<float> window_dy(size_t(t.window_count()));
  for (int64_t plane = 0; plane < s.planes; ++plane) {
    const float* x_plane = x + plane * s.h * s.w;
    for (int tile = 0; tile < t.tiles_h * t.tiles_w; ++tile) {
      const MaxPoolTile p = max_pool_tile(s, t, tile);
      REQUIRE(p.region_h * p.region_w <= t.region_floats());
      REQUIRE(p.window_count() <= t.window_count());
      for (int i = 0; i < p.region_h * p.region_w; ++i) {
        region[size_t(i)] =
            x_plane[(p.region_row0 + i / p.region_w) * s.w + p.region_col0 + i % p.region_w];
      }
      for (int j = 0; j < p.window_count(); ++j) {
        window_dy[size_t(j)] = max_pool_tile_dy(s, p, dy + plane * s.ho * s.wo, j);
      }
      for (int j = 0; j < p.window_count(); ++j) {
        argmax[size_t(j)] = max_pool_tile_argmax(s, p, region.data(), j);
      }
      for (int thread = 0; thread < t.threads; ++thread) {
        for (int e = thread; e < t.tile_h * t.tile_w; e += t.threads) {
          const int h = p.row0 + e / t.tile_w, w = p.col0 + e % t.tile_w;
          if (h < s.h && w < s.w) {
            float& out = dx[size_t(plane * s.h * s.w + h * s.w + w)];
            REQUIRE(out == -1.0f);  // each element written by one thread
            out = max_pool_tile_gradient(s, p, argmax.data(), window_dy.data(), h, w);
          }
        }
      }
    }
  }
  return dx;
}

void check_against_cpu(const Case& k, const Tensor& x, std::mt19937& gen) {
  const MaxPoolShape s = shape_of(k);
  const Attrs attrs = attrs_of(k);
  const Tensor y = run_cpu("pool", attrs, {&x});
  REQUIRE(y.shape() == Shape({k.n, k.c, s.ho, s.wo}));
  const Tensor dy = random_tensor(y.shape(), gen);
  const Tensor dx = run_cpu("pool_grad", attrs, {&x, &y, &dy});

  std::vector<float> forward(size_t(y.count())), direct(size_t(x.count()));
  for (int64_t plane = 0; plane < s.planes; ++plane) {
    const float* xp = x.data() + plane * s.h * s.w;
    const float* dyp = dy.data() + plane * s.ho * s.wo;
    for (int oh = 0; oh < s.ho; ++oh) {
      for (int ow = 0; ow < s.wo; ++ow)
        forward[size_t(plane * s.ho * s.wo + oh * s.wo + ow)] = max_pool_output(s, xp, oh, ow);
    }
    for (int h = 0; h < s.h; ++h) {
      for (int w = 0; w < s.w; ++w)
        direct[size_t(plane * s.h * s.w + h * s.w + w)] = max_pool_gradient(s, xp, dyp, h, w);
    }
  }
  CHECK(same_bits(forward, y));
  CHECK(same_bits(direct, dx));
  CHECK(same_bits(tiled_gradient(s, x.data(), dy.data()), dx));
}

}  // namespace

TEST_CASE("windows_covering finds the windows that cover an element", "[cuda][launch][pool]") {
  int64_t wrong = 0, checked = 0;
  for (int kernel = 1; kernel <= 7; ++kernel) {
    for (int stride = 1; stride <= 4; ++stride) {
      for (int pad = 0; pad < kernel; ++pad) {
        for (int size = std::max(1, kernel - 2 * pad); size <= 23; ++size) {
          const int outputs = (size + 2 * pad - kernel) / stride + 1;
          for (int i = 0; i < size; ++i) {
            int lo = outputs, hi = -1;  // brute force
            for (int o = 0; o < outputs; ++o) {
              const Span span = window_span(o, kernel, stride, pad, size);
              if (span.begin <= i && i < span.end) {
                lo = std::min(lo, o);
                hi = std::max(hi, o);
              }
            }
            const IndexRange r = windows_covering(i, kernel, stride, pad, outputs);
            const bool empty = hi < 0;
            wrong += empty ? r.lo <= r.hi : (r.lo != lo || r.hi != hi);
            wrong += r.hi - r.lo + 1 < 0;  // never less than empty
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked > 10000);
  CHECK(wrong == 0);
}

TEST_CASE("max-pool tiles cover each element once within their shared-memory bounds",
          "[cuda][launch][pool]") {
  for (int kernel = 1; kernel <= 5; ++kernel) {
    for (int stride = 1; stride <= 3; ++stride) {
      for (int pad = 0; pad < kernel; ++pad) {
        for (int size : {kernel, 7, 13, 14, 31, 32, 33, 56, 70, 112}) {
          if (size + 2 * pad < kernel) continue;
          const Case k{1, 1, size, size + 3, kernel, kernel, stride, stride, pad, pad};
          const MaxPoolShape s = shape_of(k);
          const MaxPoolTiling t = max_pool_tiling(s);
          INFO("kernel " << kernel << " stride " << stride << " pad " << pad << " size " << size);
          REQUIRE(t.threads <= kMaxPoolTileThreads);
          REQUIRE(t.threads % kWarp == 0);
          REQUIRE(t.tile_h * t.tile_w <= kMaxPoolTileElements);
          std::vector<int> seen(size_t(s.h * s.w), 0);
          for (int tile = 0; tile < t.tiles_h * t.tiles_w; ++tile) {
            const MaxPoolTile p = max_pool_tile(s, t, tile);
            CHECK(p.region_h <= t.region_h);
            CHECK(p.region_w <= t.region_w);
            CHECK(p.window_count() <= t.window_count());
            for (int h = p.row0; h < std::min(s.h, p.row0 + t.tile_h); ++h) {
              for (int w = p.col0; w < std::min(s.w, p.col0 + t.tile_w); ++w) {
                ++seen[size_t(h * s.w + w)];
                // Every window covering the element is one of the tile's, inside its region.
                const IndexRange ohs = windows_covering(h, kernel, stride, pad, s.ho);
                const IndexRange ows = windows_covering(w, kernel, stride, pad, s.wo);
                if (ohs.lo > ohs.hi || ows.lo > ows.hi) continue;
                CHECK(ohs.lo >= p.ohs.lo);
                CHECK(ohs.hi <= p.ohs.hi);
                CHECK(ows.lo >= p.ows.lo);
                CHECK(ows.hi <= p.ows.hi);
                const Span first = window_span(ohs.lo, kernel, stride, pad, s.h);
                const Span last = window_span(ohs.hi, kernel, stride, pad, s.h);
                CHECK(first.begin >= p.region_row0);
                CHECK(last.end <= p.region_row0 + p.region_h);
              }
            }
          }
          for (int v : seen) REQUIRE(v == 1);
        }
      }
    }
  }
}

TEST_CASE("max-pool kernel loops run on the host match the CPU bit for bit",
          "[cuda][launch][pool]") {
  std::mt19937 gen(3);
  const std::vector<Case> cases{
      {2, 3, 112, 112, 3, 3, 2, 2, 1, 1},  // GoogLeNet pool1 (tiles of 32 x 8)
      {2, 3, 28, 28, 3, 3, 1, 1, 1, 1},    // inception pooling
      {3, 2, 14, 14, 3, 3, 2, 2, 1, 1},   {2, 5, 7, 7, 3, 3, 1, 1, 1, 1},
      {2, 3, 12, 12, 2, 2, 2, 2, 0, 0},   {2, 3, 13, 11, 3, 3, 2, 2, 0, 0},
      {1, 2, 11, 13, 3, 3, 2, 2, 0, 0},   {2, 2, 9, 17, 2, 3, 1, 2, 1, 0},
      {1, 3, 40, 37, 1, 1, 1, 1, 0, 0},   {1, 3, 20, 20, 1, 1, 3, 3, 0, 0},
      {1, 2, 25, 19, 5, 4, 3, 2, 2, 1},   {1, 2, 6, 6, 6, 6, 1, 1, 0, 0},  // global
      {1, 2, 33, 65, 3, 3, 2, 2, 1, 1},   {1, 1, 7, 7, 7, 7, 7, 7, 3, 3},
  };
  for (const Case& k : cases) {
    INFO(k.h << "x" << k.w << " kernel " << k.kernel_h << "x" << k.kernel_w << " stride "
             << k.stride_h << "x" << k.stride_w << " pad " << k.pad_h << "x" << k.pad_w);
    const Shape shape{k.n, k.c, k.h, k.w};
    check_against_cpu(k, tied_tensor(shape, gen), gen);
    check_against_cpu(k, random_tensor(shape, gen), gen);
  }
}

TEST_CASE("max-pool windows too large for the tiles take the fallback", "[cuda][launch][pool]") {
  // GoogLeNet's pools tile; 60 x 60 windows need more shared memory than a block has, so the
  // gradient kernel falls back to scanning in global memory (test_gpu_max_pool.cpp runs both).
  CHECK(max_pool_tiling(shape_of({128, 64, 112, 112, 3, 3, 2, 2, 1, 1})).fits());
  CHECK(max_pool_tiling(shape_of({128, 832, 7, 7, 3, 3, 1, 1, 1, 1})).fits());
  CHECK(max_pool_tiling(shape_of({128, 480, 28, 28, 3, 3, 2, 2, 1, 1})).fits());
  CHECK_FALSE(max_pool_tiling(shape_of({2, 3, 120, 120, 60, 60, 1, 1, 0, 0})).fits());
  CHECK_FALSE(max_pool_tiling(shape_of({2, 3, 240, 240, 60, 60, 60, 60, 0, 0})).fits());
}
