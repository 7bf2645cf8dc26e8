"""Exercises 6 (KV cache) and 7 (grouped-query attention): wrong implementations (mutants), honest styles
and ready-made routes, appended to the catalogues of mutants.py and corpora.py (kept apart so that each
exercise's recipes read together).

Mutants: each one classic mistake of a decoder's attention (issue 38): the mask aligned top-left in a
decode step, off by one, the cache joined on the wrong axis or before the projection, the new token
attending to itself twice, keys and values swapped in the cache, heads grouped with repeat instead of
repeat_interleave, the scale from the wrong width, the group and head counts exchanged, ... A mistake in
decode_step also costs the generate tests (the reference's generate calls the student's decode_step) except
where it cannot show there: a one-block decoder's last position never reads a key after it, so a mask
that lets a query see the next key changes nothing that one block generates.
"""
import textwrap

K6, G7 = "06_kv_cache", "07_grouped_query"
CA, DS, GEN, RKV, GQA = "causal_attention", "decode_step", "generate", "repeat_kv", "grouped_query_attention"
SQUARE, LAST = "test_causal_attention_square", "test_causal_attention_last"
EMPTY, CACHED = "test_decode_step_empty_cache", "test_decode_step_cached"
ONE, STACK = "test_generate_one_layer", "test_generate"
ATTN_ALL = {SQUARE: 1, LAST: 2, EMPTY: 1, CACHED: 2, ONE: 1, STACK: 2}
STEP_ALL = {EMPTY: 1, CACHED: 2, ONE: 1, STACK: 2}
STEP_CACHED = {CACHED: 2, ONE: 1, STACK: 2}
GEN_ALL = {ONE: 1, STACK: 2}
GROUPED = {"test_repeat_kv": 2, "test_gqa_values": 2, "test_gqa_causal": 2}
GQA_VALUES = {"test_gqa_values": 2, "test_gqa_causal": 2}


def _c(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _body(text: str) -> str:
    """A function body: dedented, then indented by four spaces."""
    return textwrap.indent(_c(text), "    ")


def mutants(Mutant) -> list:
    """The mutants of exercises 6 and 7 (``Mutant``: mutants.Mutant, passed in to keep one definition)."""
    tril = ".tril(t_k - t_q)  # bottom-right"
    return [
        Mutant("m133_kv_mask_top_left", K6, CA, {LAST: 2, CACHED: 2, ONE: 1, STACK: 2}, "aligned top-left", False,
               edit=(tril, ".tril()  # exercise 5's mask")),
        Mutant("m134_kv_mask_sees_next_key", K6, CA, {SQUARE: 1, LAST: 2, EMPTY: 1, CACHED: 2, STACK: 2},
               "mask off by one (each query also sees the key right after it)", False,
               edit=(tril, ".tril(t_k - t_q + 1)")),
        Mutant("m135_kv_mask_hides_own_key", K6, CA, ATTN_ALL, "a query may not see its own key", False,
               edit=(tril, ".tril(t_k - t_q - 1)")),
        Mutant("m136_kv_no_mask", K6, CA, {SQUARE: 1, LAST: 2, EMPTY: 1, CACHED: 2, STACK: 2},
               "causal mask not applied", False,
               edit=("scores.masked_fill(~allowed, float(\"-inf\"))", "scores")),
        Mutant("m137_kv_scaled_by_value_width", K6, CA, {SQUARE: 1, LAST: 2}, "sqrt(d_v)", False,
               edit=("math.sqrt(q.shape[-1])", "math.sqrt(v.shape[-1])")),
        Mutant("m138_kv_cache_joined_on_heads", K6, DS, STEP_ALL, "along the heads axis", False,
               edit=(("torch.cat([cache[0], k], dim=2)", "torch.cat([cache[0], k], dim=1)"),
                     ("torch.cat([cache[1], v], dim=2)", "torch.cat([cache[1], v], dim=1)"))),
        Mutant("m139_kv_cache_joined_before_projection", K6, DS, STEP_CACHED, "before the keys and values are "
               "projected", False,
               edit=(("keys = torch.cat([cache[0], k], dim=2)", "past = lambda c: c.transpose(1, 2).reshape(batch, "
                      "-1, d_model)  # back to (B, T, d_model)\n    t_all = cache[0].shape[2] + t_new\n    keys = "
                      "attn.k_proj(torch.cat([past(cache[0]), x], dim=1)).reshape(batch, t_all, h, d_k)"
                      ".transpose(1, 2)"),
                     ("values = torch.cat([cache[1], v], dim=2)", "values = attn.v_proj(torch.cat([past(cache[1]), "
                      "x], dim=1)).reshape(batch, t_all, h, d_k).transpose(1, 2)"))),
        Mutant("m140_kv_new_token_attends_to_itself_twice", K6, DS, STEP_ALL, "attends to itself twice", False,
               edit=("causal_attention(q, keys, values)",
                     "causal_attention(q, torch.cat([keys, k], dim=2), torch.cat([values, v], dim=2))")),
        Mutant("m141_kv_cache_returned_as_values_keys", K6, DS, STEP_ALL, "swapped in the returned cache", False,
               edit=("(keys, values)\n", "(values, keys)\n")),
        Mutant("m142_kv_cache_read_as_values_keys", K6, DS, STEP_CACHED, "swapped when read from the cache", False,
               edit=(("torch.cat([cache[0], k], dim=2)", "torch.cat([cache[1], k], dim=2)"),
                     ("torch.cat([cache[1], v], dim=2)", "torch.cat([cache[0], v], dim=2)"))),
        Mutant("m143_kv_cache_not_attended", K6, DS, STEP_CACHED, "the cache not attended over", False,
               edit=("causal_attention(q, keys, values)", "causal_attention(q, k, v)")),
        Mutant("m144_kv_step_scaled_by_d_model", K6, DS, STEP_ALL, "sqrt(d_model) instead of sqrt(d_k)", False,
               edit=("heads, _ = causal_attention(q, keys, values)",
                     "scores = q @ keys.transpose(-2, -1) / math.sqrt(d_model)\n"
                     "    t_k = keys.shape[2]\n"
                     "    allowed = torch.ones(t_new, t_k, dtype=torch.bool).tril(t_k - t_new)\n"
                     "    heads = torch.softmax(scores.masked_fill(~allowed, float('-inf')), dim=-1) @ values")),
        Mutant("m145_kv_cache_not_kept_between_steps", K6, GEN, GEN_ALL, "not kept between steps", False,
               edit=("        for i, block in enumerate(decoder.layers):",
                     "        caches = [(empty, empty) for _ in decoder.layers]\n"
                     "        for i, block in enumerate(decoder.layers):")),
        Mutant("m146_kv_no_final_norm", K6, GEN, GEN_ALL, "final LayerNorm left out", False,
               edit=("x = decoder.norm(x)[:, -1:]", "x = x[:, -1:]")),
        Mutant("m147_kv_next_input_from_first_position", K6, GEN, GEN_ALL, "first position's output", False,
               edit=("x = decoder.norm(x)[:, -1:]", "x = decoder.norm(x)[:, :1]")),
        Mutant("m148_kv_one_cache_for_every_layer", K6, GEN, {STACK: 2}, "one cache shared by every layer", False,
               edit=("caches[i] = decode_step(block.norm1(x), caches[i],",
                     "caches[0] = decode_step(block.norm1(x), caches[0],")),
        Mutant("m149_kv_whole_sequence_fed_again", K6, GEN, {ONE: 1, STACK: 2}, "whole sequence fed again", False,
               edit=(("    x, outputs = prompt, []\n", "    x, outputs, seq = prompt, [], prompt\n"),
                     ("        outputs.append(x)\n", "        outputs.append(x)\n        seq = torch.cat([seq, x], dim=1)\n"
                      "        x = seq\n"))),
        Mutant("m150_gqa_groups_tiled_with_repeat", G7, RKV, GROUPED, "with repeat (head i reads group i % g)", False,
               edit=("x.repeat_interleave(num_heads // x.shape[1], dim=1)",
                     "x.repeat(1, num_heads // x.shape[1], 1, 1)")),
        Mutant("m151_gqa_counts_exchanged", G7, RKV, {**GROUPED, "test_gqa_shapes": 1},
               "group count and the head count exchanged", False,
               edit=("x.repeat_interleave(num_heads // x.shape[1], dim=1)", "x.repeat_interleave(x.shape[1], dim=1)")),
        Mutant("m152_gqa_repeated_along_time", G7, RKV, {**GROUPED, "test_gqa_shapes": 1}, "along the time axis", False,
               edit=("x.repeat_interleave(num_heads // x.shape[1], dim=1)",
                     "x.repeat_interleave(num_heads // x.shape[1], dim=2)")),
        Mutant("m153_gqa_mask_top_left", G7, GQA, {"test_gqa_causal": 2}, "aligned top-left", False,
               edit=(".tril(t_k - t_q)", ".tril()")),
        Mutant("m154_gqa_scaled_by_value_width", G7, GQA, GQA_VALUES, "sqrt(d_v)", False,
               edit=("math.sqrt(q.shape[-1])", "math.sqrt(v.shape[-1])")),
        Mutant("m155_gqa_expand_tiles_the_groups", G7, GQA, GQA_VALUES, "with repeat (head i reads group i % g)", False,
               edit=("k, v = repeat_kv(k, h), repeat_kv(v, h)",
                     "b, g, t_k, _ = k.shape\n"
                     "    k = k[:, None].expand(b, h // g, g, t_k, k.shape[-1]).reshape(b, h, t_k, -1)  # (B, r, g, ...)\n"
                     "    v = v[:, None].expand(b, h // g, g, t_k, v.shape[-1]).reshape(b, h, t_k, -1)")),
        Mutant("m156_gqa_keys_and_values_exchanged", G7, GQA, {"test_gqa_shapes": 1, **GQA_VALUES},
               "keys and values exchanged", False, edit=("k, v = repeat_kv(k, h), repeat_kv(v, h)",
                                                         "k, v = repeat_kv(v, h), repeat_kv(k, h)")),
    ]


# --- right answers in other styles (full marks, hidden and visible) ----------------------------------------

CA_HEAD = "def causal_attention(q, k, v):\n"
STEP_HEAD = "def decode_step(x, cache, attn):\n"
GEN_HEAD = "def generate(prompt, decoder, steps):\n"
RKV_HEAD = "def repeat_kv(x, num_heads):\n"
GQA_HEAD = "def grouped_query_attention(q, k, v, causal=False):\n"

HONEST_6 = [  # (name, cell, code)
    ("h_kv_einsum", CA, CA_HEAD + _body('''
        t_q, t_k = q.shape[-2], k.shape[-2]
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / q.shape[-1] ** 0.5
        future = torch.triu(torch.ones(t_q, t_k, dtype=torch.bool), diagonal=t_k - t_q + 1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return torch.einsum("bhqk,bhkd->bhqd", weights, v), weights
    ''')),
    ("h_kv_additive_mask_positions", CA, CA_HEAD + _body('''
        t_q, t_k = q.shape[-2], k.shape[-2]
        pos_q = torch.arange(t_k - t_q, t_k)[:, None]          # absolute positions of the queries
        pos_k = torch.arange(t_k)[None, :]
        bias = torch.zeros(t_q, t_k, dtype=q.dtype).masked_fill(pos_k > pos_q, float("-inf"))
        weights = torch.softmax(q @ k.mT / math.sqrt(q.size(-1)) + bias, dim=-1)
        return weights @ v, weights
    ''')),
    ("h_kv_big_negative_and_offset_loop", CA, CA_HEAD + _body('''
        t_q, t_k = q.shape[-2], k.shape[-2]
        offset = t_k - t_q
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
        mask = torch.zeros(t_q, t_k, dtype=torch.bool)
        for i in range(t_q):
            mask[i, offset + i + 1:] = True
        scores = torch.where(mask, torch.full_like(scores, -1e9), scores)
        weights = F.softmax(scores, dim=-1)
        return torch.matmul(weights, v), weights
    ''')),
    ("h_kv_numpy_style_stable_softmax", CA, CA_HEAD + _body('''
        t_q, t_k = q.shape[-2], k.shape[-2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        allowed = torch.tril(torch.ones(t_k, t_k, dtype=torch.bool))[-t_q:]   # the last rows of the square mask
        scores = scores.masked_fill(~allowed, float("-inf"))
        scores = scores - scores.amax(dim=-1, keepdim=True)
        e = scores.exp()
        weights = e / e.sum(dim=-1, keepdim=True)
        return weights @ v, weights
    ''')),
    ("h_kv_step_list_cache_and_views", DS, STEP_HEAD + _body('''
        b, t, d = x.shape
        h = attn.num_heads
        heads = [p(x).view(b, t, h, d // h).transpose(1, 2) for p in (attn.q_proj, attn.k_proj, attn.v_proj)]
        q, k, v = heads
        past_k, past_v = list(cache)                      # the cache as a list of two tensors
        keys, values = torch.cat((past_k, k), -2), torch.cat((past_v, v), -2)
        out, _ = causal_attention(q, keys, values)
        return attn.out_proj(out.transpose(1, 2).contiguous().view(b, t, d)), [keys, values]
    ''')),
    ("h_kv_step_preallocated_buffer", DS, STEP_HEAD + _body('''
        b, t, d = x.shape
        h, d_k = attn.num_heads, attn.head_dim
        t_c = cache[0].shape[2]
        keys = x.new_empty(b, h, t_c + t, d_k)            # a preallocated buffer, filled in place
        values = x.new_empty(b, h, t_c + t, d_k)
        keys[:, :, :t_c] = cache[0]
        values[:, :, :t_c] = cache[1]
        keys[:, :, t_c:] = attn.k_proj(x).reshape(b, t, h, d_k).permute(0, 2, 1, 3)
        values[:, :, t_c:] = attn.v_proj(x).reshape(b, t, h, d_k).permute(0, 2, 1, 3)
        q = attn.q_proj(x).reshape(b, t, h, d_k).permute(0, 2, 1, 3)
        out, _ = causal_attention(q, keys, values)
        return attn.out_proj(out.permute(0, 2, 1, 3).reshape(b, t, d)), (keys, values)
    ''')),
    ("h_kv_step_f_linear_and_unflatten", DS, STEP_HEAD + _body('''
        h = attn.num_heads

        def heads(proj):
            return F.linear(x, proj.weight, proj.bias).unflatten(-1, (h, -1)).transpose(1, 2)
        keys = torch.cat([cache[0], heads(attn.k_proj)], dim=2)
        values = torch.cat([cache[1], heads(attn.v_proj)], dim=2)
        out, _ = causal_attention(heads(attn.q_proj), keys, values)
        return F.linear(out.transpose(1, 2).flatten(2), attn.out_proj.weight, attn.out_proj.bias), (keys, values)
    ''')),
    ("h_kv_step_heads_in_a_loop", DS, STEP_HEAD + _body('''
        b, t, d = x.shape
        h, d_k = attn.num_heads, attn.head_dim
        q, k, v = attn.q_proj(x), attn.k_proj(x), attn.v_proj(x)
        new_keys, new_values, outs = [], [], []
        for i in range(h):
            cols = slice(i * d_k, (i + 1) * d_k)
            ki = torch.cat([cache[0][:, i], k[..., cols]], dim=1)     # (B, T_cached + T, d_k)
            vi = torch.cat([cache[1][:, i], v[..., cols]], dim=1)
            oi, _ = causal_attention(q[..., cols].unsqueeze(1), ki.unsqueeze(1), vi.unsqueeze(1))
            outs.append(oi.squeeze(1))
            new_keys.append(ki)
            new_values.append(vi)
        out = attn.out_proj(torch.cat(outs, dim=-1))
        return out, (torch.stack(new_keys, dim=1), torch.stack(new_values, dim=1))
    ''')),
    ("h_kv_step_einsum_weights", DS, STEP_HEAD + _body('''
        b, t, d = x.shape
        h = attn.num_heads
        w_q = attn.q_proj.weight.view(h, -1, d)            # (h, d_k, d_model): each head's rows
        w_k = attn.k_proj.weight.view(h, -1, d)
        w_v = attn.v_proj.weight.view(h, -1, d)
        q = torch.einsum("btd,hkd->bhtk", x, w_q) + attn.q_proj.bias.view(h, 1, -1)
        k = torch.einsum("btd,hkd->bhtk", x, w_k) + attn.k_proj.bias.view(h, 1, -1)
        v = torch.einsum("btd,hkd->bhtk", x, w_v) + attn.v_proj.bias.view(h, 1, -1)
        keys, values = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        out, _ = causal_attention(q, keys, values)
        return attn.out_proj(torch.einsum("bhtk->bthk", out).reshape(b, t, d)), (keys, values)
    ''')),
    ("h_kv_generate_dict_of_caches", GEN, GEN_HEAD + _body('''
        b, _, d = prompt.shape
        h = decoder.num_heads
        caches = {}
        fed, produced = prompt, []
        for step in range(steps):
            for i, block in enumerate(decoder.layers):
                if i not in caches:
                    caches[i] = (fed.new_zeros(b, h, 0, d // h), fed.new_zeros(b, h, 0, d // h))
                a, caches[i] = decode_step(block.norm1(fed), caches[i], block.self_attn)
                fed = fed + a
                fed = fed + block.feed_forward(block.norm2(fed))
            fed = decoder.norm(fed)[:, -1:, :]
            produced.append(fed)
        return torch.cat(produced, dim=1)
    ''')),
    ("h_kv_generate_ffn_by_hand_preallocated_out", GEN, GEN_HEAD + _body('''
        b, t_p, d = prompt.shape
        h = decoder.num_heads
        out = prompt.new_empty(b, steps, d)                 # filled one step at a time
        caches = [(prompt[:, :0].reshape(b, h, 0, d // h),) * 2 for _ in range(len(decoder.layers))]
        x = prompt
        for s in range(steps):
            for i in range(len(decoder.layers)):
                block = decoder.layers[i]
                y, caches[i] = decode_step(block.norm1(x), caches[i], block.self_attn)
                x = x + y
                ff = block.feed_forward
                x = x + ff.linear2(F.relu(ff.linear1(block.norm2(x))))
            x = decoder.norm(x)[:, -1:]
            out[:, s] = x[:, 0]
        return out
    ''')),
    ("h_kv_generate_block_helper_and_layer_norm", GEN, _c('''
        def block_step(block, x, cache):
            """One pre-norm block with its cache."""
            attended, cache = decode_step(block.norm1(x), cache, block.self_attn)
            x = x + attended
            return x + block.feed_forward(block.norm2(x)), cache


        def generate(prompt, decoder, steps):
            h = decoder.num_heads
            d = prompt.shape[-1]
            zeros = torch.zeros(prompt.shape[0], h, 0, d // h, dtype=prompt.dtype)
            caches = [(zeros, zeros)] * len(decoder.layers)
            x, outs = prompt, []
            for _ in range(steps):
                for i, block in enumerate(decoder.layers):
                    x, caches[i] = block_step(block, x, caches[i])
                n = decoder.norm
                x = F.layer_norm(x, n.normalized_shape, n.weight, n.bias, n.eps)[:, -1:]
                outs += [x]
            return torch.cat(outs, 1)
    ''')),
    ("h_kv_generate_while_loop", GEN, GEN_HEAD + _body('''
        b, _, d = prompt.shape
        h = decoder.num_heads
        caches = [None] * len(decoder.layers)
        x, outs = prompt, []
        while len(outs) < steps:
            for i, block in enumerate(decoder.layers):
                cache = caches[i] if caches[i] is not None else (x.new_zeros(b, h, 0, d // h),) * 2
                a, caches[i] = decode_step(block.norm1(x), cache, block.self_attn)
                x = x + a
                x = x + block.feed_forward(block.norm2(x))
            x = decoder.norm(x).narrow(1, x.shape[1] - 1, 1)
            outs.append(x)
        return torch.cat(outs, dim=1)
    ''')),
    ("h_kv_small_module_class", DS, _c('''
        class Step(torch.nn.Module):
            """A decode step as a small module around the given weights."""

            def __init__(self, attn):
                super().__init__()
                self.attn = attn
                self.h = attn.num_heads

            def split(self, y):
                b, t, d = y.shape
                return y.view(b, t, self.h, d // self.h).transpose(1, 2)

            def forward(self, x, cache):
                q = self.split(self.attn.q_proj(x))
                keys = torch.cat([cache[0], self.split(self.attn.k_proj(x))], dim=2)
                values = torch.cat([cache[1], self.split(self.attn.v_proj(x))], dim=2)
                out, _ = causal_attention(q, keys, values)
                b, _, t, _ = out.shape
                return self.attn.out_proj(out.transpose(1, 2).reshape(b, t, -1)), (keys, values)


        def decode_step(x, cache, attn):
            return Step(attn)(x, cache)
    ''')),
    ("h_kv_float64_inside", CA, CA_HEAD + _body('''
        t_q, t_k = q.shape[-2], k.shape[-2]
        q64, k64, v64 = q.double(), k.double(), v.double()
        scores = q64 @ k64.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(torch.ones(t_q, t_k).tril(t_k - t_q) == 0, -math.inf)
        weights = scores.softmax(-1)
        return (weights @ v64).to(q.dtype), weights.to(q.dtype)
    ''')),
    ("h_kv_baddbmm_flattened_heads", CA, CA_HEAD + _body('''
        b, h, t_q, d_k = q.shape
        t_k = k.shape[2]
        q3, k3, v3 = q.reshape(b * h, t_q, d_k), k.reshape(b * h, t_k, d_k), v.reshape(b * h, t_k, -1)
        bias = torch.full((t_q, t_k), float("-inf"), dtype=q.dtype).triu(t_k - t_q + 1)
        scores = torch.baddbmm(bias.expand(b * h, t_q, t_k), q3, k3.transpose(1, 2), alpha=d_k ** -0.5)
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights, v3).view(b, h, t_q, -1), weights.view(b, h, t_q, t_k)
    ''')),
]

HONEST_7 = [
    ("h_gqa_repeat_expand_reshape", RKV, RKV_HEAD + _body('''
        b, g, t, d = x.shape
        return x[:, :, None].expand(b, g, num_heads // g, t, d).reshape(b, num_heads, t, d)
    ''')),
    ("h_gqa_repeat_index_select", RKV, RKV_HEAD + _body('''
        group_of_head = torch.arange(num_heads) // (num_heads // x.shape[1])
        return x.index_select(1, group_of_head)
    ''')),
    ("h_gqa_repeat_fancy_index", RKV, RKV_HEAD + _body('''
        r = num_heads // x.size(1)
        return x[:, [i // r for i in range(num_heads)]]
    ''')),
    ("h_gqa_repeat_cat_loop", RKV, RKV_HEAD + _body('''
        r = num_heads // x.shape[1]
        parts = []
        for group in range(x.shape[1]):
            parts += [x[:, group:group + 1]] * r
        return torch.cat(parts, dim=1)
    ''')),
    ("h_gqa_repeat_llama_style", RKV, RKV_HEAD + _body('''
        batch, n_kv, slen, head_dim = x.shape
        n_rep = num_heads // n_kv
        if n_rep == 1:
            return x
        x = x[:, :, None, :, :].expand(batch, n_kv, n_rep, slen, head_dim)
        return x.reshape(batch, n_kv * n_rep, slen, head_dim)
    ''')),
    ("h_gqa_repeat_numpy_inside", RKV, RKV_HEAD + _body('''
        import numpy as np
        return torch.from_numpy(np.repeat(x.numpy(), num_heads // x.shape[1], axis=1))
    ''')),
    ("h_gqa_grouped_queries_no_repeat", GQA, GQA_HEAD + _body('''
        b, h, t_q, d_k = q.shape
        g, t_k = k.shape[1], k.shape[2]
        qg = q.reshape(b, g, (h // g) * t_q, d_k)                 # a group's queries stacked, no repeat
        scores = (qg @ k.transpose(-2, -1) / math.sqrt(d_k)).view(b, h, t_q, t_k)
        if causal:
            scores = scores.masked_fill(~torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q), float("-inf"))
        weights = scores.softmax(-1)
        out = weights.view(b, g, (h // g) * t_q, t_k) @ v
        return out.view(b, h, t_q, -1), weights
    ''')),
    ("h_gqa_einsum_group_axis", GQA, GQA_HEAD + _body('''
        b, h, t_q, d_k = q.shape
        g, t_k = k.shape[1], k.shape[2]
        qg = q.view(b, g, h // g, t_q, d_k)                       # (B, g, r, T_q, d_k)
        scores = torch.einsum("bgrqd,bgkd->bgrqk", qg, k) / math.sqrt(d_k)
        if causal:
            future = torch.ones(t_q, t_k, dtype=torch.bool).triu(t_k - t_q + 1)
            scores = scores.masked_fill(future, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = torch.einsum("bgrqk,bgkd->bgrqd", weights, v)
        return out.reshape(b, h, t_q, -1), weights.reshape(b, h, t_q, t_k)
    ''')),
    ("h_gqa_per_head_loop", GQA, GQA_HEAD + _body('''
        h, g = q.shape[1], k.shape[1]
        t_q, t_k = q.shape[2], k.shape[2]
        outs, ws = [], []
        for i in range(h):
            j = i // (h // g)
            s = q[:, i] @ k[:, j].transpose(-1, -2) / math.sqrt(q.shape[-1])
            if causal:
                s = s + torch.zeros(t_q, t_k, dtype=s.dtype).masked_fill(
                    torch.ones(t_q, t_k).tril(t_k - t_q) == 0, float("-inf"))
            w = torch.softmax(s, dim=-1)
            ws.append(w)
            outs.append(w @ v[:, j])
        return torch.stack(outs, 1), torch.stack(ws, 1)
    ''')),
    ("h_gqa_module_class", GQA, _c('''
        class GroupedQuery(torch.nn.Module):
            def __init__(self, causal):
                super().__init__()
                self.causal = causal

            def forward(self, q, k, v):
                h = q.shape[1]
                k, v = repeat_kv(k, h), repeat_kv(v, h)
                scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
                if self.causal:
                    t_q, t_k = scores.shape[-2:]
                    keep = torch.tril(torch.ones(t_q, t_k, dtype=torch.bool), diagonal=t_k - t_q)
                    scores = scores.masked_fill(~keep, float("-inf"))
                weights = torch.softmax(scores, -1)
                return weights @ v, weights


        def grouped_query_attention(q, k, v, causal=False):
            return GroupedQuery(causal)(q, k, v)
    ''')),
    ("h_gqa_where_mask_and_f_softmax", GQA, GQA_HEAD + _body('''
        h = q.size(1)
        keys = repeat_kv(k, h)
        values = repeat_kv(v, h)
        scores = torch.matmul(q, keys.mT) / math.sqrt(q.size(-1))
        if causal:
            t_q, t_k = scores.shape[-2], scores.shape[-1]
            rows = torch.arange(t_q).unsqueeze(1) + (t_k - t_q)
            cols = torch.arange(t_k).unsqueeze(0)
            scores = torch.where(cols <= rows, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
        weights = F.softmax(scores, dim=-1)
        return torch.matmul(weights, values), weights
    ''')),
    ("h_gqa_float64_inside", GQA, GQA_HEAD + _body('''
        dtype = q.dtype
        q, k, v = q.double(), repeat_kv(k, q.shape[1]).double(), repeat_kv(v, q.shape[1]).double()
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            t_q, t_k = scores.shape[-2:]
            scores = scores - 1e30 * torch.ones(t_q, t_k, dtype=torch.float64).triu(t_k - t_q + 1)
        weights = torch.softmax(scores, -1)
        return (weights @ v).to(dtype), weights.to(dtype)
    ''')),
    ("h_gqa_logsumexp", GQA, GQA_HEAD + _body('''
        r = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(r, 1), v.repeat_interleave(r, 1)
        scores = q @ k.transpose(2, 3) / math.sqrt(q.shape[3])
        if causal:
            t_q, t_k = q.shape[2], k.shape[2]
            scores = scores.masked_fill(torch.ones(t_q, t_k).tril(t_k - t_q).logical_not(), -math.inf)
        weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
        return weights @ v, weights
    ''')),
    ("h_gqa_expand_inline_bmm", GQA, GQA_HEAD + _body('''
        b, h, t_q, d_k = q.shape
        g, t_k, d_v = k.shape[1], k.shape[2], v.shape[3]
        kk = k.unsqueeze(2).expand(b, g, h // g, t_k, d_k).reshape(b * h, t_k, d_k)
        vv = v.unsqueeze(2).expand(b, g, h // g, t_k, d_v).reshape(b * h, t_k, d_v)
        scores = torch.bmm(q.reshape(b * h, t_q, d_k), kk.transpose(1, 2)) / math.sqrt(d_k)
        if causal:
            scores = scores.masked_fill(torch.ones(t_q, t_k).triu(t_k - t_q + 1).bool(), float("-inf"))
        weights = scores.softmax(dim=2)
        return torch.bmm(weights, vv).view(b, h, t_q, d_v), weights.view(b, h, t_q, t_k)
    ''')),
    ("h_gqa_list_and_tuple_return", GQA, GQA_HEAD + _body('''
        h = q.shape[1]
        k, v = repeat_kv(k, h), repeat_kv(v, h)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        if causal:
            t_q, t_k = scores.shape[-2:]
            scores = scores.masked_fill(torch.triu(torch.ones_like(scores, dtype=torch.bool), 1 + t_k - t_q),
                                        float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return [weights @ v, weights]
    ''')),
    ("h_gqa_no_grad_and_contiguous", GQA, "@torch.no_grad()\n" + GQA_HEAD + _body('''
        h = q.shape[1]
        k = repeat_kv(k, h).contiguous()
        v = repeat_kv(v, h).contiguous()
        scores = q.contiguous() @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
        if causal:
            t_q, t_k = q.shape[-2], k.shape[-2]
            scores.masked_fill_(~torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q), float("-inf"))
        weights = scores.softmax(dim=-1)
        return weights @ v, weights
    ''')),
]

FREE6 = ('''
from mha_checks.visible import small_decoder
import matplotlib.pyplot as plt
decoder = small_decoder(layers=2, d_model=12, num_heads=3, d_ff=20, seed=0)
out = generate(torch.randn(1, 3, 12), decoder, steps=5)
plt.plot(out[0, :, 0]); plt.show()
''', '''
# my own check against torch's kernel (allowed here: outside my functions)
q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
print(torch.allclose(causal_attention(q, k, v)[0], F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-5))
''')
FREE7 = ('''
q, k, v = torch.randn(2, 6, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)   # what my function should match
print(torch.allclose(grouped_query_attention(q, k, v)[0], ref, atol=1e-5))
''', '''%timeit grouped_query_attention(torch.randn(8, 8, 64, 16), torch.randn(8, 2, 64, 16), torch.randn(8, 2, 64, 16))
''')


def honest(Entry) -> list:
    """Honest styles (corpora.Entry), each with a free cell or two that is neither run nor judged."""
    return [Entry(name, K6, cell, code, (FREE6[i % 2],)) for i, (name, cell, code) in enumerate(HONEST_6)] + \
        [Entry(name, G7, cell, code, (FREE7[i % 2],)) for i, (name, cell, code) in enumerate(HONEST_7)]


# --- ready-made routes (0 for every test whose function reaches them) ---------------------------------------

def ready_made(Entry, ready: str, course: str) -> list:
    """Routes to torch's or the course's own answers, each refused with its true reason (``ready``: torch's
    attention, ``course``: the course's code)."""
    sdpa_ca = CA_HEAD + ("    t_q, t_k = q.shape[-2], k.shape[-2]\n"
                         "    mask = torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)\n"
                         "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None\n")
    return [
        Entry("r60_kv_sdpa_bottom_right_mask", K6, CA, sdpa_ca, says=ready),
        Entry("r61_kv_course_decoder_function", K6, CA, "from mha_lib.decoder import grouped_query_attention\n\n"
              + CA_HEAD + "    return grouped_query_attention(q, k, v, causal=True)\n", says=course),
        Entry("r62_kv_course_causal_mask", K6, CA, "from mha_lib import decoder\n\n" + CA_HEAD
              + "    allowed = ~decoder.causal_mask(q.shape[-2], k.shape[-2])\n"
                "    w = torch.softmax((q @ k.mT / math.sqrt(q.shape[-1])).masked_fill(~allowed, -math.inf), -1)\n"
                "    return w @ v, w\n", says=course),
        Entry("r63_gqa_sdpa_enable_gqa", G7, RKV, RKV_HEAD + "    probe = x[:, :1].expand(-1, num_heads, -1, -1)\n"
              "    F.scaled_dot_product_attention(probe, x, x, enable_gqa=True)\n"
              "    return x.repeat_interleave(num_heads // x.shape[1], dim=1)\n", says=ready),
        Entry("r64_gqa_course_repeat_through_the_decoder", G7, RKV, "import mha_lib.decoder as dec\n\n" + RKV_HEAD
              + "    return dec.grouped_query_attention(x[:, :1].expand(-1, num_heads, -1, -1), x, x)[0]\n", says=course),
        Entry("r65_gqa_torch_module_alias", G7, RKV, "attend = torch.nn.functional.scaled_dot_product_attention\n\n"
              + RKV_HEAD + "    return attend(x, x, x) if False else x.repeat_interleave(num_heads // x.shape[1], 1)\n",
              says=ready),
    ]
