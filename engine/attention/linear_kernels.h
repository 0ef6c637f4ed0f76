// File: engine/attention/linear_kernels.h
//
// Private to engine/attention: the vector helpers linear_kernels.cc uses for
// the KDA/GLA cores, exported for the layer code in linear_attention.cc (the
// cores themselves are public in linear_attention.h). Each dispatches at run
// time to an AVX2 build when the CPU has it, so both files share one copy.
//
// Thread-safety: pure functions on caller buffers.
#pragma once

#include <cstddef>
#include <vector>

namespace sy::engine::linear_internal {

float Softplus(float x);                     // log(1 + e^x), exact for large x
void Grow(std::vector<float>* v, size_t n);  // capacity only grows: no per-step allocation
void SigmoidInPlace(float* x, int n);
void SiluInPlace(float* x, int n);
void MulAdd(const float* a, const float* b, float* y, int n);  // y += a * b

}  // namespace sy::engine::linear_internal
