// kernels/swiglu.cc — the SwiGLU gate g = silu(a) * b and its backward, vectorised (vec_math.h).
#include "kernels/swiglu.h"

#include "kernels/vec_math.h"

namespace moe4d {

void swiglu_forward(float* g, const float* a, const float* b, int64_t n) {
  vec::map_lanes(n, [&](int64_t i, auto tag) {
    using V = decltype(tag);
    const V av = vec::get<V>(a + i);
    vec::put(g + i, av * vec::sigmoid(av) * vec::get<V>(b + i));
  });
}

// silu'(a) = s + a s (1 - s) with s = sigmoid(a). Every input element is read before an output is
// written, so da or db may alias dg.
void swiglu_backward(float* da, float* db, const float* dg, const float* a, const float* b, int64_t n) {
  vec::map_lanes(n, [&](int64_t i, auto tag) {
    using V = decltype(tag);
    const V av = vec::get<V>(a + i), bv = vec::get<V>(b + i), gv = vec::get<V>(dg + i);
    const V s = vec::sigmoid(av);
    const V silu = av * s;
    vec::put(da + i, gv * bv * (s + silu * (1.0f - s)));
    vec::put(db + i, gv * silu);
  });
}

}  // namespace moe4d
