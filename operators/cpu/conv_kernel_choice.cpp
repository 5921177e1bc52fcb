// Which CPU kernel runs a convolution: the rules of engine "auto", from bench_conv_layers and
// training traces on 2-core AVX2 and AVX-512 machines (batch 64; the record, with figures:
// docs/MEASUREMENTS.md, "Convolution kernel choices"). In order:
//   1. Every output pixel sees every input pixel (GoogLeNet's 1x1 and 2x2 planes at 28x28): a
//      dense layer of the taps joining each pair of pixels (conv_dense_planes.cpp), every
//      direction; 2-2.7x faster than oneDNN and the image groups there.
//   2. 1x1 kernels over planes of up to 4 pixels: one GEMM of the batch in channels-last order
//      (conv_channels_last.cpp); from 4x4 up oneDNN's chunks win the weight gradients.
//   3. Taps that meet only padding (5x5 kernels over 2x2 planes) are cropped and the inner
//      geometry chosen for again (conv_cropped_taps.cpp).
//   4. With oneDNN's AVX2 kernels (not measured against its AVX-512 ones), 3x3 and 5x5 stride-1
//      kernels between at least 16 input and 16 output channels, whose transformed kernels take
//      at most 6 MB (up to 144 -> 288 channels; more: oneDNN's or im2col's kernels, up to 3.5x
//      faster at ResNet-50's 512 channels), by Winograd's F(4x4, 3x3) (3x3
//      forwards and data gradients, but over planes of 1 or 2 pixels a side, and the weight
//      gradients of 16 input and 16 output channels), F(2x2, 3x3) and
//      F(2x2, 5x5) (conv_winograd.cpp), which multiply 4x, 2.25x and 2.78x less: 3x3 forwards
//      and data gradients 1.3-2.5x faster than oneDNN over resnet20's 28x28, 14x14 and 7x7
//      planes and GoogLeNet-28's 7x7 and 4x4 ones (F(2x2, 3x3): 1.3-1.5x; F(4x4, 3x3) 10-40%
//      faster than it in the same runs); weight gradients over
//      planes of 7x7 and more 1.1-1.8x faster than the kernels below (over 4x4 ones 5-35% slower:
//      too few tiles to sum); 5x5 kernels over planes of 7x7 and more: the convnet's over
//      14x14 1.45x (forward), 1.6x (data) and 2x (weights), GoogLeNet-28's over 4x4 level or 10-25%
//      slower. The stems' few channels would not pay back the transforms.
//   5. oneDNN's blocked kernels everywhere else but:
//      - small output planes, where its per-call and per-chunk costs dominate: weight gradients
//        of up to 16 pixels (AVX2 kernels) or 9 (AVX-512), forwards of up to 4 or 1; its data
//        gradient wins at every size;
//      - backward passes with fewer than 8 input or output channels (stems), which its blocks
//        pad up to 8 or 16 channels (1 -> 32 channels: 4-6x slower than im2col);
//      - with AVX2 kernels only, deterministic weight gradients of 1x1 kernels and of stride-1
//        kernels up to 3x3 over planes larger than 7x7, where its fixed chunks lose to ours by
//        10-25%; its 5x5 ones and strided 3x3s win and stay, but for those between 128 x 128
//        channel pairs or more (ResNet-50's at 224x224: strided 3x3s and 7x7 planes), which
//        im2col and the image groups ran 1.2-1.8x faster;
//      - with AVX2 kernels only, 1x1 stride-1 kernels over planes of 56x56 and more (ResNet-50's
//        first stage at 224x224): a GEMM per image on the image itself, 1.4-2.2x faster.
//   6. The im2col family: GEMMs over groups of images for planes of up to 49 pixels
//      (conv_image_groups.cpp); stride-1 weight gradients of up to 32 output channels as dot
//      products of shifted rows, which write no columns (conv_shifted_rows.cpp; with more output
//      channels the GEMM wins); else im2col and a GEMM per image (conv_im2col.cpp).
// Stems keep our kernels under AVX-512 too, where oneDNN's chunks would be faster: ours sum
// each image alone, so replicas of half a batch add up to the whole batch's gradient almost
// bit for bit. engine "onednn" takes oneDNN wherever it has an implementation, "im2col" step 6,
// "winograd" Winograd's kernel wherever it fits (else auto's choice).
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "base/error.hpp"
#include "operators/cpu/conv_kernel.hpp"

namespace purine {

bool onednn_has_avx512() {
  static const bool has =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  return has;
}

namespace {

// Output planes of at most this many pixels count as small (the rules above): the weight
// gradients' and the forward's, with oneDNN's AVX2 kernels and with its AVX-512 ones.
// The im2col family runs weight gradients and forwards of planes up to kImageGroupsMaxPlane as
// GEMMs over image groups.
struct SmallPlanes {
  int64_t weights, forward;
};
constexpr int64_t kImageGroupsMaxPlane = 49;
constexpr SmallPlanes kSmallPlanesAvx2{16, 4};
constexpr SmallPlanes kSmallPlanesAvx512{9, 1};
// Deterministic weight gradients between at least this many pairs of input and output channels
// go to the im2col family with oneDNN's AVX2 kernels (the rules above).
constexpr int64_t kManyChannelPairs = 128 * 128;
// 1x1 stride-1 kernels over planes of at least this many pixels are one GEMM per image on the
// image itself (im2col's kernel) with oneDNN's AVX2 kernels (the rules above).
constexpr int64_t kPointwiseGemmMinPlane = 56 * 56;
// Weight gradients of at most this many output channels go to shifted rows (the rules above).
constexpr int64_t kShiftedRowsMaxOutputs = 32;
// Winograd's kernels take convolutions of at least this many input and output channels, and
// weight gradients and 5x5 kernels over output planes of at least this many pixels.
constexpr int64_t kWinogradMinChannels = 16;
constexpr int64_t kWinogradMinPlane = 49;
// ...and whose transformed kernels take at most this many bytes: the kernel reads them again for
// every block of tiles (and the weight gradient keeps a copy per batch chunk), so larger ones go
// from the caches to memory. At batch 16 over 3x224x224 images, 3x3 forwards and data gradients
// with up to 6 MB of them (GoogLeNet's inception 4d, 144 -> 288 channels) ran 1.7-2.1x faster
// than oneDNN, and from 7.4 MB (its 4e, 5a and 5b, ResNet-50's 256 and 512 channels) up to 3.5x
// slower, as did the weight gradients of ResNet-50's 512 channels (16.8 MB of dU).
constexpr int64_t kWinogradMaxTransformedBytes = int64_t{6} << 20;

// Whether make_kernel's "auto" picks oneDNN for `direction` and `g` once the special kernels
// (dense planes, channels last, cropped taps) have passed (the rules above).
bool auto_takes_onednn(bool deterministic, ConvDirection direction, const ConvGeometry& g) {
  const int64_t plane = g.ho * g.wo;
  const SmallPlanes& small_planes = onednn_has_avx512() ? kSmallPlanesAvx512 : kSmallPlanesAvx2;
  const bool small =
      (direction == ConvDirection::kBackwardWeights && plane <= small_planes.weights) ||
      (direction == ConvDirection::kForward && plane <= small_planes.forward);
  // Measured at stride 1 over planes of 14x14 and up; a strided 3x3 (resnet20's 28x28 -> 14x14)
  // went to im2col, not shifted rows, which lost to oneDNN's chunks (the rules above).
  const bool avx2_small_kernel_weights =
      direction == ConvDirection::kBackwardWeights && deterministic && !onednn_has_avx512() &&
      plane > kImageGroupsMaxPlane &&
      (g.kh * g.kw == 1 || (g.kh * g.kw <= 9 && g.stride_h == 1 && g.stride_w == 1));
  const bool avx2_many_channel_weights = direction == ConvDirection::kBackwardWeights &&
                                         deterministic && !onednn_has_avx512() &&
                                         g.c * g.o >= kManyChannelPairs;
  const bool avx2_large_plane_pointwise = !onednn_has_avx512() && g.kh * g.kw == 1 &&
                                          g.stride_h == 1 && g.stride_w == 1 &&
                                          plane >= kPointwiseGemmMinPlane;
  return !small && !avx2_small_kernel_weights && !avx2_many_channel_weights &&
         !avx2_large_plane_pointwise &&
         (direction == ConvDirection::kForward || (g.c >= 8 && g.o >= 8));
}

// Whether make_kernel's "auto" runs `direction` of `g` by Winograd's kernels (the rules above).
bool auto_takes_winograd(ConvDirection direction, const ConvGeometry& g) {
  const bool needs_large_plane = direction == ConvDirection::kBackwardWeights || g.kh == 5;
  if (needs_large_plane && g.ho * g.wo < kWinogradMinPlane) return false;
  return winograd_fit(g) && !onednn_has_avx512() && g.c >= kWinogradMinChannels &&
         g.o >= kWinogradMinChannels &&
         winograd_transformed_weight_bytes(direction, g) <= kWinogradMaxTransformedBytes;
}

// The im2col family's kernel for `direction` and `g`: what runs where oneDNN does not.
KernelChoice im2col_family_kernel(ConvDirection direction, const ConvGeometry& g) {
  if (g.ho * g.wo <= kImageGroupsMaxPlane && direction != ConvDirection::kBackwardData)
    return KernelChoice::kImageGroups;
  if (direction == ConvDirection::kBackwardWeights && g.o <= kShiftedRowsMaxOutputs &&
      shifted_rows_fit(g))
    return KernelChoice::kShiftedRows;
  return KernelChoice::kIm2col;
}

}  // namespace

KernelChoice choose_kernel(const std::string& engine, bool deterministic, ConvDirection direction,
                           const ConvGeometry& g) {
  if (engine == "winograd")
    return winograd_fit(g) ? KernelChoice::kWinograd
                           : choose_kernel("auto", deterministic, direction, g);
  ConvGeometry inner;
  if (engine == "auto" && dense_planes_fit(g)) return KernelChoice::kDensePlanes;
  if (engine == "auto" && channels_last_fit(g)) return KernelChoice::kChannelsLast;
  if (engine == "auto" && crop_taps(g, &inner)) return KernelChoice::kCroppedTaps;
  if (engine == "auto" && auto_takes_winograd(direction, g)) return KernelChoice::kWinograd;
  if ((engine == "onednn" ||
       (engine == "auto" && auto_takes_onednn(deterministic, direction, g))) &&
      g.n > 0)
    return KernelChoice::kOnednn;
  return im2col_family_kernel(direction, g);
}

// `engine` is validated by the caller.
std::unique_ptr<ConvKernel> make_kernel(const std::string& engine, bool deterministic,
                                        ConvDirection direction, const ConvGeometry& g, int threads,
                                        bool bias_relu, ConvBlocks blocks) {
  const KernelChoice choice = choose_kernel(engine, deterministic, direction, g);
  if (choice == KernelChoice::kWinograd)
    return make_winograd_kernel(direction, g, threads, bias_relu, blocks);
  if (engine == "winograd")  // where it does not fit: auto's choice
    return make_kernel("auto", deterministic, direction, g, threads, bias_relu, blocks);
  if (!(blocks == ConvBlocks{})) {
    if (choice == KernelChoice::kOnednn) {
      try {
        return make_onednn_kernel(deterministic, direction, g, threads, bias_relu, blocks);
      } catch (const dnnl::error&) {
        // No oneDNN implementation for this geometry: the plain kernel, as below.
      }
    }
    if (choice == KernelChoice::kShiftedRows) return make_shifted_rows_kernel(g, threads, blocks);
    return make_blocked_args_kernel(
        make_kernel(engine, deterministic, direction, g, threads, bias_relu, {}), direction, g,
        threads, bias_relu, blocks);
  }
  // Every output pixel sees every input pixel: a dense layer of the taps (conv_dense_planes.cpp).
  if (choice == KernelChoice::kDensePlanes)
    return make_dense_planes_kernel(direction, g, threads, bias_relu);
  // 1x1 kernels over planes of up to 4 pixels: one GEMM of the batch in channels-last order.
  if (choice == KernelChoice::kChannelsLast)
    return make_channels_last_kernel(direction, g, threads, bias_relu);
  // Outer taps that meet only padding (GoogLeNet's 5x5 kernels over 2x2 planes at 28x28): the
  // convolution of the taps that meet the input, by the kernel for that geometry.
  ConvGeometry inner;
  if (choice == KernelChoice::kCroppedTaps && crop_taps(g, &inner))
    return make_cropped_taps_kernel(
        direction, g, inner,
        make_kernel(engine, deterministic, direction, inner, threads, bias_relu, {}), threads);
  KernelChoice family = choice;
  if (choice == KernelChoice::kOnednn) {
    try {
      return make_onednn_kernel(deterministic, direction, g, threads, bias_relu, {});
    } catch (const dnnl::error& e) {
      // No oneDNN implementation for this geometry: im2col handles every geometry.
      require(engine == "auto", "oneDNN has no convolution for this geometry (", e.what(),
              "); use engine 'auto' or 'im2col'");
      family = im2col_family_kernel(direction, g);
    }
  }
  if (family == KernelChoice::kImageGroups)
    return make_image_group_kernel(direction, g, threads, bias_relu);
  if (family == KernelChoice::kShiftedRows) return make_shifted_rows_kernel(g, threads);
  return make_im2col_kernel(direction, g, threads, bias_relu);
}

}  // namespace purine
