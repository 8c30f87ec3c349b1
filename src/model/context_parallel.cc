// model/context_parallel.cc — the chunk layout and the collectives of context parallelism.
#include "model/context_parallel.h"

#include <cstring>

#include "backend/backend.h"
#include "core/check.h"

namespace moe4d {
namespace {

// Rows of CP rank r are its chunks j = 0, 1: sequence chunk r, then 2c - 1 - r.
int chunk_of(int r, int j, int cp) { return j == 0 ? r : 2 * cp - 1 - r; }

// Copies between rank r's rows [B][2][chunk][row] at `rows` and the sequence order [B][S][row] at
// `full`, for every sequence b and both chunks: to_full picks the direction. Floats on the backend.
void move_chunks(BlockContext& ctx, int r, float* rows, float* full, int row, bool to_full) {
  const int cp = ctx.pc.cp_size(), B = ctx.batch, chunk = ctx.seq / 2;
  const size_t piece = sizeof(float) * size_t(chunk) * row;
  const size_t rows_pitch = sizeof(float) * size_t(ctx.seq) * row, full_pitch = rows_pitch * cp;
  for (int j = 0; j < 2; ++j) {
    float* mine = rows + size_t(j) * chunk * row;
    float* there = full + size_t(chunk_of(r, j, cp)) * chunk * row;
    if (to_full)
      ctx.backend().copy_rows(there, full_pitch, mine, rows_pitch, piece, size_t(B));
    else
      ctx.backend().copy_rows(mine, rows_pitch, there, full_pitch, piece, size_t(B));
  }
}

}  // namespace

int cp_position(int local, int seq, int cp, int rank) {
  const int chunk = seq / (2 * cp);
  const int j = local / chunk;
  return chunk_of(rank, j, cp) * chunk + local % chunk;
}

void cp_keep_local_tokens(int* tokens, int batch, int seq, int cp, int rank) {
  if (cp == 1) return;
  MOE4D_CHECK_MSG(seq % (2 * cp) == 0, "seq {} is not divisible into 2 x {} chunks", seq, cp);
  const int chunk = seq / (2 * cp), share = seq / cp;
  std::vector<int> full(tokens, tokens + size_t(batch) * seq);
  for (int b = 0; b < batch; ++b)
    for (int j = 0; j < 2; ++j)
      std::memcpy(tokens + size_t(b) * share + size_t(j) * chunk,
                  full.data() + size_t(b) * seq + size_t(chunk_of(rank, j, cp)) * chunk, sizeof(int) * chunk);
}

void cp_gather_sequence(BlockContext& ctx, const float* local, float* full, int row) {
  const int cp = ctx.pc.cp_size();
  const size_t count = size_t(ctx.tokens()) * row;
  float* blocks = ctx.scratch.alloc_f32(count * cp);  // rank-major: [c][B][S / c][row]
  ctx.pc.cp->all_gather(local, blocks, count, DType::kF32);
  for (int r = 0; r < cp; ++r) move_chunks(ctx, r, blocks + r * count, full, row, /*to_full=*/true);
}

void cp_reduce_scatter_sequence(BlockContext& ctx, const float* full, float* local, int row) {
  const int cp = ctx.pc.cp_size();
  const size_t count = size_t(ctx.tokens()) * row;
  float* blocks = ctx.scratch.alloc_f32(count * cp);
  for (int r = 0; r < cp; ++r) move_chunks(ctx, r, blocks + r * count, const_cast<float*>(full), row, false);
  ctx.pc.cp->reduce_scatter(blocks, local, count, DType::kF32);
}

void cp_take_local(BlockContext& ctx, const float* full, float* local, int row) {
  move_chunks(ctx, ctx.pc.cp_rank(), local, const_cast<float*>(full), row, /*to_full=*/false);
}

void cp_put_local(BlockContext& ctx, const float* local, float* full, int row) {
  ctx.backend().zero(full, sizeof(float) * size_t(ctx.tokens()) * ctx.pc.cp_size() * row);
  move_chunks(ctx, ctx.pc.cp_rank(), const_cast<float*>(local), full, row, /*to_full=*/true);
}

}  // namespace moe4d
