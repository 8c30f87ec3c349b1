// kernels/embedding.h — (vocab-parallel) token embedding lookup.
//
// A shard holds table rows for vocab ids [v0, v0 + vocab_local). Tokens outside the shard produce
// zero rows; an all-reduce over the tensor-parallel group completes the lookup.
#pragma once

namespace moe4d {

// out[t, :] = table[tokens[t] - v0, :] if owned, else 0. out: [n, d]; table: [vocab_local, d].
void embedding_forward(float* out, const float* table, const int* tokens, int n, int d, int v0, int vocab_local);

// dtable[tokens[t] - v0, :] += dout[t, :] for owned tokens (accumulates).
void embedding_backward(float* dtable, const float* dout, const int* tokens, int n, int d, int v0, int vocab_local);

}  // namespace moe4d
