"""Two corpora for the ready-made rule (issue 25): honest implementations in many real-world styles,
each of which must be admitted and earn full marks, and ready-made routes to torch's own attention,
each of which must score 0 with a true reason.

Every honest notebook also carries free cells a student writes around an answer: plots, timing,
IPython magics, a try-it comparison with ``torch.nn.MultiheadAttention`` or
``F.scaled_dot_product_attention``. They are neither run nor judged, so they cost nothing.

An entry is a notebook of the release (exercises/mha/) with its solution cell replaced by ``code``
and ``free`` cells added after it. ``corpus_course`` grades them all with the course's own command,
as ``make grade`` does.
"""
import textwrap
from dataclasses import dataclass

P, S, M, O, A = "01_project", "02_split_heads", "03_merge_heads", "04_output_projection", "05_assembly"
MHA = "multi_head_attention"


@dataclass(frozen=True)
class Entry:
    name: str
    notebook: str
    cell: str
    code: str
    free: tuple = ()
    says: str = ""      # ready-made routes: words of the true reason, in every test's feedback
    source: str = ""    # where the style comes from


def _c(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _body(text: str) -> str:
    """A function body: dedented, then indented by four spaces."""
    return textwrap.indent(_c(text), "    ")


# --- free cells a student writes around an answer (never run, never judged) --------------------------

PLOT = _c("""
    import matplotlib.pyplot as plt
    %matplotlib inline
    out, weights = multi_head_attention(x, x, x, mha, causal=True)
    plt.imshow(weights[0, 0].detach().numpy(), cmap="viridis")
    plt.title("head 0")
    plt.show()
""")
TIMING = _c("""
    import time
    start = time.perf_counter()
    for _ in range(100):
        multi_head_attention(x, x, x, mha)
    print(f"{(time.perf_counter() - start) * 10:.2f} ms per call")
""")
MAGIC = "%timeit multi_head_attention(x, x, x, mha)\n"
COMPARE = _c("""
    # my own check against torch's module (allowed here: outside my function)
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True)
    x = torch.randn(2, 5, 8)
    ref_out, ref_w = reference(x, x, x, average_attn_weights=False)
    out, w = multi_head_attention(x, x, x, reference)
    torch.testing.assert_close(out, ref_out)
""")
SDPA = _c("""
    import torch.nn.functional as F
    q = k = v = torch.randn(2, 2, 5, 4)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # what my heads should match
    print(expected.shape)
""")
NUMPY_PLOT = _c("""
    import matplotlib.pyplot as plt
    import time
    x = np.random.default_rng(0).normal(size=(2, 5, 12))
    t0 = time.time(); y = split_heads(x, 3); print(time.time() - t0)
    plt.plot(y[0, 0]); plt.show()
""")
FREE5 = [(PLOT, TIMING), (COMPARE,), (MAGIC, SDPA), (TIMING, COMPARE), (PLOT, MAGIC, COMPARE, SDPA)]

_HEAD = "def multi_head_attention(query, key, value, mha, causal=False):\n"


def _mha(name: str, code: str, i: int, source: str = "") -> Entry:
    return Entry(name, A, MHA, code, FREE5[i % len(FREE5)], source=source)


# --- honest implementations -----------------------------------------------------------------------

NANOGPT = _c('''
    import math
    from dataclasses import dataclass

    import torch
    import torch.nn as nn
    from torch.nn import functional as F


    @dataclass
    class GPTConfig:
        n_embd: int = 768
        n_head: int = 12
        dropout: float = 0.0
        bias: bool = True


    class CausalSelfAttention(nn.Module):

        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            # key, query, value projections for all heads, but in a batch
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            # output projection
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout

        def forward(self, query, key, value, causal):
            B, T, C = query.size()  # batch size, sequence length, embedding dimensionality (n_embd)
            S = key.size(1)
            w_q, w_k, w_v = self.c_attn.weight.split(self.n_embd, dim=0)
            b_q, b_k, b_v = self.c_attn.bias.split(self.n_embd, dim=0)
            q = F.linear(query, w_q, b_q).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
            k = F.linear(key, w_k, b_k).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)    # (B, nh, S, hs)
            v = F.linear(value, w_v, b_v).view(B, S, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, S, hs)
            # manual implementation of attention
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            if causal:
                bias = torch.tril(torch.ones(T, S)).view(1, 1, T, S)
                att = att.masked_fill(bias == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v  # (B, nh, T, S) x (B, nh, S, hs) -> (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
            return self.c_proj(y), att


    def multi_head_attention(query, key, value, mha, causal=False):
        config = GPTConfig(n_embd=mha.embed_dim, n_head=mha.num_heads)
        attn = CausalSelfAttention(config)
        with torch.no_grad():
            attn.c_attn.weight.copy_(mha.in_proj_weight)
            attn.c_attn.bias.copy_(mha.in_proj_bias)
            attn.c_proj.weight.copy_(mha.out_proj.weight)
            attn.c_proj.bias.copy_(mha.out_proj.bias)
        attn.eval()
        return attn(query, key, value, causal)
''')

D2L = _c('''
    import math
    import torch
    from torch import nn


    def masked_softmax(X, mask):
        """Perform softmax operation by masking elements on the last axis."""
        if mask is None:
            return nn.functional.softmax(X, dim=-1)
        X = X.masked_fill(~mask, -1e6)
        return nn.functional.softmax(X, dim=-1)


    class DotProductAttention(nn.Module):
        """Scaled dot product attention."""
        def __init__(self, dropout):
            super().__init__()
            self.dropout = nn.Dropout(dropout)

        # Shape of queries: (batch_size, no. of queries, d)
        # Shape of keys: (batch_size, no. of key-value pairs, d)
        def forward(self, queries, keys, values, mask=None):
            d = queries.shape[-1]
            scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
            self.attention_weights = masked_softmax(scores, mask)
            return torch.bmm(self.dropout(self.attention_weights), values)


    def transpose_qkv(X, num_heads):
        """Transposition for parallel computation of multiple attention heads."""
        X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
        X = X.permute(0, 2, 1, 3)
        return X.reshape(-1, X.shape[2], X.shape[3])


    def transpose_output(X, num_heads):
        """Reverse the operation of transpose_qkv."""
        X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
        X = X.permute(0, 2, 1, 3)
        return X.reshape(X.shape[0], X.shape[1], -1)


    class MultiHeadAttention(nn.Module):
        """Multi-head attention."""
        def __init__(self, num_hiddens, num_heads, dropout, bias=True):
            super().__init__()
            self.num_heads = num_heads
            self.attention = DotProductAttention(dropout)
            self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
            self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
            self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
            self.W_o = nn.Linear(num_hiddens, num_hiddens, bias=bias)

        def forward(self, queries, keys, values, mask):
            queries = transpose_qkv(self.W_q(queries), self.num_heads)
            keys = transpose_qkv(self.W_k(keys), self.num_heads)
            values = transpose_qkv(self.W_v(values), self.num_heads)
            if mask is not None:
                mask = torch.repeat_interleave(mask, repeats=self.num_heads, dim=0)
            output = self.attention(queries, keys, values, mask)
            output_concat = transpose_output(output, self.num_heads)
            return self.W_o(output_concat)


    def multi_head_attention(query, key, value, mha, causal=False):
        d, h = mha.embed_dim, mha.num_heads
        model = MultiHeadAttention(d, h, 0.0)
        w = mha.in_proj_weight.chunk(3)
        b = mha.in_proj_bias.chunk(3)
        for layer, w_i, b_i in zip((model.W_q, model.W_k, model.W_v), w, b):
            layer.weight.data = w_i.clone()
            layer.bias.data = b_i.clone()
        model.W_o.weight.data = mha.out_proj.weight.clone()
        model.W_o.bias.data = mha.out_proj.bias.clone()
        B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
        mask = None
        if causal:
            mask = torch.ones(T_q, T_k, dtype=torch.bool).tril().expand(B, T_q, T_k)
        model.eval()
        out = model(query, key, value, mask)
        return out, model.attention.attention_weights.reshape(B, h, T_q, T_k)
''')

ANNOTATED = _c('''
    import copy
    import math

    import torch
    import torch.nn as nn


    def clones(module, N):
        "Produce N identical layers."
        return nn.ModuleList([copy.deepcopy(module) for _ in range(N)])


    def attention(query, key, value, mask=None, dropout=None):
        "Compute 'Scaled Dot Product Attention'"
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        if dropout is not None:
            p_attn = dropout(p_attn)
        return torch.matmul(p_attn, value), p_attn


    class MultiHeadedAttention(nn.Module):
        def __init__(self, h, d_model, dropout=0.1):
            "Take in model size and number of heads."
            super(MultiHeadedAttention, self).__init__()
            assert d_model % h == 0
            # We assume d_v always equals d_k
            self.d_k = d_model // h
            self.h = h
            self.linears = clones(nn.Linear(d_model, d_model), 4)
            self.attn = None
            self.dropout = nn.Dropout(p=dropout)

        def forward(self, query, key, value, mask=None):
            "Implements Figure 2"
            if mask is not None:
                # Same mask applied to all h heads.
                mask = mask.unsqueeze(1)
            nbatches = query.size(0)

            # 1) Do all the linear projections in batch from d_model => h x d_k
            query, key, value = [
                lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2)
                for lin, x in zip(self.linears, (query, key, value))
            ]

            # 2) Apply attention on all the projected vectors in batch.
            x, self.attn = attention(query, key, value, mask=mask, dropout=self.dropout)

            # 3) "Concat" using a view and apply a final linear.
            x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
            del query
            del key
            del value
            return self.linears[-1](x)


    def subsequent_mask(size_q, size_k):
        "Mask out subsequent positions."
        attn_shape = (1, size_q, size_k)
        mask = torch.triu(torch.ones(attn_shape), diagonal=1).type(torch.uint8)
        return mask == 0


    def multi_head_attention(query, key, value, mha, causal=False):
        model = MultiHeadedAttention(mha.num_heads, mha.embed_dim, dropout=0.0)
        weights = list(mha.in_proj_weight.chunk(3)) + [mha.out_proj.weight]
        biases = list(mha.in_proj_bias.chunk(3)) + [mha.out_proj.bias]
        with torch.no_grad():
            for lin, w, b in zip(model.linears, weights, biases):
                lin.weight.copy_(w)
                lin.bias.copy_(b)
        mask = subsequent_mask(query.size(1), key.size(1)) if causal else None
        out = model.eval()(query, key, value, mask)
        return out, model.attn
''')

_PROJ = ("    d_model, h = query.shape[-1], mha.num_heads\n    d_k = d_model // h\n"
         "    w_q, w_k, w_v = mha.in_proj_weight.chunk(3)\n    b_q, b_k, b_v = mha.in_proj_bias.chunk(3)\n")
_OUT = "    return F.linear(concat, mha.out_proj.weight, mha.out_proj.bias), weights\n"

HONEST_MHA = [
    _mha("h01_nanogpt_causal_self_attention", NANOGPT, 0,
         "karpathy/nanoGPT model.py CausalSelfAttention (its slow path), adapted to cross-attention and mha's weights"),
    _mha("h02_d2l_multihead_attention", D2L, 1, "d2l-ai/d2l-en chapter_attention-mechanisms multihead-attention"),
    _mha("h03_annotated_transformer", ANNOTATED, 2, "harvardnlp/annotated-transformer MultiHeadedAttention"),
    _mha("h04_einsum_one_pass", _HEAD + _PROJ + _body("""
            q = torch.einsum('btd,ed->bte', query, w_q) + b_q
            k = torch.einsum('btd,ed->bte', key, w_k) + b_k
            v = torch.einsum('btd,ed->bte', value, w_v) + b_v
            q, k, v = (t.unflatten(-1, (h, d_k)) for t in (q, k, v))          # (B, T, h, d_k)
            scores = torch.einsum('bqhd,bkhd->bhqk', q, k) / math.sqrt(d_k)
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
            weights = scores.softmax(dim=-1)
            concat = torch.einsum('bhqk,bkhd->bqhd', weights, v).flatten(2)
        """) + _OUT, 3),
    _mha("h05_python_loops_over_batch_and_heads", _HEAD + _PROJ + _body("""
            B, T_q, T_k = query.shape[0], query.shape[1], key.shape[1]
            q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
            outs = torch.zeros(B, T_q, d_model)
            weights = torch.zeros(B, h, T_q, T_k)
            for b in range(B):
                for i in range(h):
                    cols = slice(i * d_k, (i + 1) * d_k)
                    s = q[b, :, cols] @ k[b, :, cols].T / math.sqrt(d_k)
                    for t in range(T_q):
                        if causal:
                            s[t, t + 1:] = float('-inf')
                    w = torch.softmax(s, dim=-1)
                    weights[b, i] = w
                    outs[b, :, cols] = w @ v[b, :, cols]
            concat = outs
        """) + _OUT, 4),
    _mha("h06_numpy_inside", _c("""
        import numpy as np


        def softmax(x, axis=-1):
            e = np.exp(x - x.max(axis=axis, keepdims=True))
            return e / e.sum(axis=axis, keepdims=True)


        def multi_head_attention(query, key, value, mha, causal=False):
            W = mha.in_proj_weight.detach().numpy().astype(np.float64)
            b = mha.in_proj_bias.detach().numpy().astype(np.float64)
            d, h = W.shape[1], mha.num_heads
            d_k = d // h

            def heads(x, i):
                y = x.detach().numpy() @ W[i * d:(i + 1) * d].T + b[i * d:(i + 1) * d]
                return y.reshape(x.shape[0], x.shape[1], h, d_k).transpose(0, 2, 1, 3)

            q, k, v = heads(query, 0), heads(key, 1), heads(value, 2)
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)
            if causal:
                scores = np.where(np.tril(np.ones(scores.shape[-2:], dtype=bool)), scores, -np.inf)
            weights = softmax(scores)
            concat = (weights @ v).transpose(0, 2, 1, 3).reshape(query.shape[0], query.shape[1], d)
            out = concat @ mha.out_proj.weight.detach().numpy().T + mha.out_proj.bias.detach().numpy()
            return torch.from_numpy(out).float(), torch.from_numpy(weights).float()
    """), 0),
    _mha("h07_sequence_first_bmm_like_torch", _HEAD + _PROJ + _body("""
            q_, k_, v_ = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)   # (T, B, d)
            T_q, B, T_k = q_.shape[0], q_.shape[1], k_.shape[0]
            q = F.linear(q_, w_q, b_q).reshape(T_q, B * h, d_k).transpose(0, 1)             # (B*h, T_q, d_k)
            k = F.linear(k_, w_k, b_k).reshape(T_k, B * h, d_k).transpose(0, 1)
            v = F.linear(v_, w_v, b_v).reshape(T_k, B * h, d_k).transpose(0, 1)
            q = q * (1.0 / math.sqrt(d_k))
            mask = torch.zeros(T_q, T_k)
            if causal:
                mask = mask.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool).triu(1), float('-inf'))
            attn = torch.baddbmm(mask, q, k.transpose(-2, -1)).softmax(dim=-1)               # (B*h, T_q, T_k)
            concat = torch.bmm(attn, v).transpose(0, 1).reshape(T_q, B, d_model).transpose(0, 1)
            weights = attn.view(B, h, T_q, T_k)
        """) + _OUT, 1),
    _mha("h08_linear_layers_loaded_from_mha", _c("""
        def multi_head_attention(query, key, value, mha, causal=False):
            d, h = mha.embed_dim, mha.num_heads
            projections = [torch.nn.Linear(d, d) for _ in range(3)]
            out_proj = torch.nn.Linear(d, d)
            with torch.no_grad():
                for layer, w, b in zip(projections, mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)):
                    layer.weight.copy_(w)
                    layer.bias.copy_(b)
                out_proj.weight.copy_(mha.out_proj.weight)
                out_proj.bias.copy_(mha.out_proj.bias)
            q, k, v = (p(x).unflatten(-1, (h, d // h)).transpose(1, 2) for p, x in zip(projections, (query, key, value)))
            scores = q @ k.mT / math.sqrt(d // h)
            if causal:
                scores = scores + torch.full(scores.shape[-2:], float('-inf')).triu(1)
            weights = scores.softmax(-1)
            return out_proj((weights @ v).transpose(1, 2).flatten(2)), weights
    """), 2),
    _mha("h09_plain_class_with_call", _c("""
        class Attention:
            def __init__(self, mha, causal):
                self.h = mha.num_heads
                self.w_in, self.b_in = mha.in_proj_weight, mha.in_proj_bias
                self.out = mha.out_proj
                self.causal = causal

            def split(self, x, i):
                d = x.shape[-1]
                y = x @ self.w_in[i * d:(i + 1) * d].T + self.b_in[i * d:(i + 1) * d]
                return y.view(x.shape[0], x.shape[1], self.h, d // self.h).transpose(1, 2)

            def __call__(self, query, key, value):
                q, k, v = self.split(query, 0), self.split(key, 1), self.split(value, 2)
                scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
                if self.causal:
                    scores = scores.masked_fill(torch.ones(scores.shape[-2:]).triu(1).bool(), float('-inf'))
                weights = scores.softmax(dim=-1)
                return self.out((weights @ v).transpose(1, 2).flatten(2)), weights


        def multi_head_attention(query, key, value, mha, causal=False):
            return Attention(mha, causal)(query, key, value)
    """), 3),
    _mha("h10_generator_of_heads", _HEAD + _PROJ + _body("""
            def heads(x, w, b):
                y = F.linear(x, w, b)
                for i in range(h):
                    yield y[..., i * d_k:(i + 1) * d_k]

            outs, weights = [], []
            for q, k, v in zip(heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)):
                s = q @ k.transpose(-2, -1) / math.sqrt(d_k)
                if causal:
                    s = torch.where(torch.ones_like(s, dtype=torch.bool).tril(), s, torch.tensor(float('-inf')))
                w = torch.softmax(s, dim=-1)
                outs.append(w @ v)
                weights.append(w)
            concat, weights = torch.cat(outs, dim=-1), torch.stack(weights, dim=1)
        """) + _OUT, 4),
    _mha("h11_functools_reduce_and_itertools", _c("""
        import functools
        import itertools
        import operator


        def multi_head_attention(query, key, value, mha, causal=False):
            h, d = mha.num_heads, mha.embed_dim
            d_k = d // h
            w = dict(zip('qkv', mha.in_proj_weight.chunk(3)))
            b = dict(zip('qkv', mha.in_proj_bias.chunk(3)))
            x = {'q': query, 'k': key, 'v': value}
            proj = {n: F.linear(x[n], w[n], b[n]) for n in 'qkv'}
            parts, weights = [], []
            for i, (qi, ki) in enumerate(itertools.product(range(h), repeat=2)):
                if qi != ki:
                    continue
                cols = slice(qi * d_k, (qi + 1) * d_k)
                s = operator.matmul(proj['q'][..., cols], proj['k'][..., cols].transpose(1, 2)) / math.sqrt(d_k)
                if causal:
                    s = s.masked_fill(torch.ones(s.shape[-2:]).triu(1) > 0, -1e9)
                a = s.softmax(-1)
                weights.append(a)
                parts.append(a @ proj['v'][..., cols])
            concat = functools.reduce(lambda left, right: torch.cat([left, right], dim=-1), parts)
            return F.linear(concat, mha.out_proj.weight, mha.out_proj.bias), torch.stack(weights, 1)
    """), 0),
    _mha("h12_config_dataclass_passed_to_helpers", _c("""
        from dataclasses import dataclass
        from typing import Optional


        @dataclass
        class Sizes:
            h: int
            d_k: int
            causal: bool = False


        def split(x: torch.Tensor, w: torch.Tensor, b: Optional[torch.Tensor], sizes: Sizes) -> torch.Tensor:
            return F.linear(x, w, b).unflatten(-1, (sizes.h, sizes.d_k)).transpose(1, 2)


        def mask(scores: torch.Tensor, sizes: Sizes) -> torch.Tensor:
            if not sizes.causal:
                return scores
            return scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))


        def multi_head_attention(query, key, value, mha, causal=False):
            sizes = Sizes(mha.num_heads, mha.head_dim, causal)
            w, b = mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)
            q, k, v = (split(x, w_i, b_i, sizes) for x, w_i, b_i in zip((query, key, value), w, b))
            weights = mask(q @ k.mT / sizes.d_k ** 0.5, sizes).softmax(-1)
            concat = (weights @ v).transpose(1, 2).flatten(2)
            return F.linear(concat, mha.out_proj.weight, mha.out_proj.bias), weights
    """), 1),
    _mha("h13_named_tuple_result", _c("""
        from typing import NamedTuple


        class AttentionOutput(NamedTuple):
            output: torch.Tensor
            weights: torch.Tensor


        def attend(q, k, v, causal) -> AttentionOutput:
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
            if causal:
                scores.masked_fill_(torch.ones(scores.shape[-2:], dtype=torch.bool).triu_(1), float('-inf'))
            w = scores.softmax(dim=-1)
            return AttentionOutput(w @ v, w)


        def multi_head_attention(query, key, value, mha, causal=False):
            h = mha.num_heads
            w, b = mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)
            q, k, v = [F.linear(x, w_i, b_i).unflatten(-1, (h, -1)).transpose(1, 2)
                       for x, w_i, b_i in zip((query, key, value), w, b)]
            result = attend(q, k, v, causal)
            concat = result.output.transpose(1, 2).flatten(2)
            return mha.out_proj(concat), result.weights
    """), 2),
    _mha("h14_lru_cached_mask_and_builtin_names", _c("""
        from functools import lru_cache


        @lru_cache(maxsize=None)
        def causal_mask(t_q, t_k):
            return torch.ones(t_q, t_k, dtype=torch.bool).triu(1)


        def multi_head_attention(query, key, value, mha, causal=False):
            input, type, format = query, 'causal' if causal else 'full', '{} heads of {}'
            print(format.format(mha.num_heads, mha.head_dim))
            h, d = mha.num_heads, mha.embed_dim
            w_q, w_k, w_v = mha.in_proj_weight.chunk(3)
            b_q, b_k, b_v = mha.in_proj_bias.chunk(3)
            q = F.linear(input, w_q, b_q).view(input.shape[0], -1, h, d // h).transpose(1, 2)
            k = F.linear(key, w_k, b_k).view(key.shape[0], -1, h, d // h).transpose(1, 2)
            v = F.linear(value, w_v, b_v).view(value.shape[0], -1, h, d // h).transpose(1, 2)
            scores = q @ k.transpose(2, 3) / math.sqrt(d // h)
            if type == 'causal':
                scores = scores.masked_fill(causal_mask(q.shape[2], k.shape[2]), float('-inf'))
            weights = scores.softmax(dim=-1)
            return F.linear((weights @ v).transpose(1, 2).reshape(input.shape), mha.out_proj.weight,
                            mha.out_proj.bias), weights
    """), 3),
    _mha("h15_module_with_registered_buffer_and_softmax_attribute", _c("""
        import torch.nn as nn


        class MHA(nn.Module):
            def __init__(self, mha, max_len=64):
                super().__init__()
                self.h, self.dim = mha.num_heads, mha.embed_dim
                self.register_buffer('mask', torch.ones(max_len, max_len, dtype=torch.bool).triu(1))
                self.register_buffer('w_in', mha.in_proj_weight.detach().clone())
                self.register_buffer('b_in', mha.in_proj_bias.detach().clone())
                self.softmax = nn.Softmax(dim=-1)
                self.dropout = nn.Dropout(0.0)
                self.out = mha.out_proj
                self._scale = (self.dim // self.h) ** -0.5

            def _heads(self, x, i):
                d = self.dim
                y = F.linear(x, self.w_in[i * d:(i + 1) * d], self.b_in[i * d:(i + 1) * d])
                return y.view(*x.shape[:2], self.h, d // self.h).permute(0, 2, 1, 3)

            def forward(self, query, key, value, causal=False):
                q, k, v = self._heads(query, 0), self._heads(key, 1), self._heads(value, 2)
                scores = torch.matmul(q, k.transpose(-2, -1)) * self._scale
                if causal:
                    scores = scores.masked_fill(self.mask[:q.shape[2], :k.shape[2]], float('-inf'))
                weights = self.dropout(self.softmax(scores))
                return self.out(torch.matmul(weights, v).permute(0, 2, 1, 3).flatten(2)), weights


        def multi_head_attention(query, key, value, mha, causal=False):
            return MHA(mha).eval()(query, key, value, causal=causal)
    """), 4),
    _mha("h16_no_grad_device_and_checks", _c("""
        @torch.no_grad()
        def multi_head_attention(query, key, value, mha, causal=False):
            device = 'cuda' if torch.cuda.is_available() else 'cpu'
            if query.dim() != 3 or query.shape[-1] != mha.embed_dim:
                raise ValueError(f'expected (B, T, {mha.embed_dim}), got {tuple(query.shape)}')
            h, d = mha.num_heads, mha.embed_dim
            w = mha.in_proj_weight.to(device)
            b = mha.in_proj_bias.to(device)
            q, k, v = (F.linear(x.to(device), w[i * d:(i + 1) * d], b[i * d:(i + 1) * d])
                       for i, x in enumerate((query, key, value)))
            q, k, v = (t.reshape(t.shape[0], t.shape[1], h, d // h).permute(0, 2, 1, 3) for t in (q, k, v))
            scores = torch.einsum('bhqd,bhkd->bhqk', q, k) * torch.rsqrt(torch.tensor(float(d // h)))
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
            weights = scores.softmax(-1)
            assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:-1]), atol=1e-5)
            concat = torch.einsum('bhqk,bhkd->bqhd', weights, v).reshape(query.shape)
            return F.linear(concat, mha.out_proj.weight, mha.out_proj.bias).cpu(), weights.cpu()
    """), 0),
    _mha("h17_closures_and_nonlocal_counter", _c("""
        calls = 0


        def make_head_fn(w, b, h):
            def project(x):
                nonlocal w
                y = F.linear(x, w, b)
                return y.unflatten(-1, (h, -1)).transpose(1, 2)
            return project


        def multi_head_attention(query, key, value, mha, causal=False):
            global calls
            calls += 1
            fns = [make_head_fn(w, b, mha.num_heads) for w, b in zip(mha.in_proj_weight.chunk(3),
                                                                     mha.in_proj_bias.chunk(3))]
            q, k, v = (fn(x) for fn, x in zip(fns, (query, key, value)))
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if causal:
                scores = scores - 1e9 * torch.ones(scores.shape[-2:]).triu(1)
            weights = torch.softmax(scores, dim=-1)
            concat = (weights @ v).transpose(1, 2).flatten(-2)
            return mha.out_proj(concat), weights
    """), 1),
    _mha("h18_match_on_causal_and_lambdas", _HEAD + _PROJ + _body("""
            split = lambda x, w, b: F.linear(x, w, b).view(x.shape[0], -1, h, d_k).transpose(1, 2)
            q, k, v = split(query, w_q, b_q), split(key, w_k, b_k), split(value, w_v, b_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
            match causal:
                case True:
                    later = torch.arange(k.shape[2])[None, :] > torch.arange(q.shape[2])[:, None]
                    scores = scores.masked_fill(later, -math.inf)
                case False:
                    pass
            weights = torch.exp(scores - torch.logsumexp(scores, dim=-1, keepdim=True))
            concat = (weights @ v).transpose(1, 2).flatten(2)
        """) + _OUT, 2),
    _mha("h19_float64_internally", _HEAD + _PROJ + _body("""
            f = lambda t: t.double()
            q = F.linear(f(query), f(w_q), f(b_q)).unflatten(-1, (h, d_k)).transpose(1, 2)
            k = F.linear(f(key), f(w_k), f(b_k)).unflatten(-1, (h, d_k)).transpose(1, 2)
            v = F.linear(f(value), f(w_v), f(b_v)).unflatten(-1, (h, d_k)).transpose(1, 2)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
            weights = scores.softmax(-1)
            concat = (weights @ v).transpose(1, 2).flatten(2)
            return (F.linear(concat, f(mha.out_proj.weight), f(mha.out_proj.bias)).float(), weights.float())
        """), 3),
    _mha("h20_tensordot_and_chunk_stack", _HEAD + _PROJ + _body("""
            def heads(x, w, b):
                y = torch.tensordot(x, w, dims=([2], [1])) + b              # (B, T, d_model)
                return torch.stack(y.chunk(h, dim=-1), dim=1)               # (B, h, T, d_k)
            q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
            scores = torch.matmul(q, k.transpose(-1, -2)).div(math.sqrt(d_k))
            if causal:
                scores = torch.where(torch.ones(scores.shape[-2:]).tril().bool(), scores, torch.full_like(scores, -1e30))
            weights = F.softmax(scores, dim=-1)
            concat = torch.cat(torch.unbind(torch.matmul(weights, v), dim=1), dim=-1)
        """) + _OUT, 4),
    _mha("h21_in_place_ops_on_fresh_tensors", _HEAD + _PROJ + _body("""
            q = F.linear(query, w_q, b_q).view(query.shape[0], -1, h, d_k).transpose_(1, 2)
            k = F.linear(key, w_k, b_k).view(key.shape[0], -1, h, d_k).transpose_(1, 2)
            v = F.linear(value, w_v, b_v).view(value.shape[0], -1, h, d_k).transpose_(1, 2)
            scores = q @ k.transpose(-2, -1)
            scores.div_(math.sqrt(d_k))
            if causal:
                blocked = torch.ones(scores.shape[-2:], dtype=torch.bool)
                blocked.triu_(1)
                scores.masked_fill_(blocked, float('-inf'))
            scores.sub_(scores.amax(-1, keepdim=True)).exp_()
            weights = scores / scores.sum(-1, keepdim=True)
            concat = (weights @ v).transpose(1, 2).reshape(query.shape)
        """) + _OUT, 0),
    _mha("h22_additive_mask_from_numpy", _c("""
        import numpy as np


        def additive_causal_mask(t_q, t_k):
            m = np.triu(np.full((t_q, t_k), -np.inf, dtype=np.float32), k=1)
            return torch.from_numpy(m)


        def multi_head_attention(query, key, value, mha, causal=False):
            h, d = mha.num_heads, mha.embed_dim
            q = F.linear(query, mha.in_proj_weight[:d], mha.in_proj_bias[:d])
            k = F.linear(key, mha.in_proj_weight[d:2 * d], mha.in_proj_bias[d:2 * d])
            v = F.linear(value, mha.in_proj_weight[2 * d:], mha.in_proj_bias[2 * d:])
            q, k, v = (t.reshape(t.shape[0], t.shape[1], h, d // h).swapaxes(1, 2) for t in (q, k, v))
            scores = q @ k.swapaxes(-1, -2) / np.sqrt(d // h)
            if causal:
                scores = scores + additive_causal_mask(q.shape[2], k.shape[2])
            weights = scores.softmax(dim=-1)
            return F.linear((weights @ v).swapaxes(1, 2).flatten(2), mha.out_proj.weight, mha.out_proj.bias), weights
    """), 1),
    _mha("h23_mask_after_softmax_renormalised", _HEAD + _PROJ + _body("""
            split = lambda x, w, b: F.linear(x, w, b).view(x.shape[0], -1, h, d_k).transpose(1, 2)
            q, k, v = split(query, w_q, b_q), split(key, w_k, b_k), split(value, w_v, b_v)
            weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d_k), dim=-1)
            if causal:
                weights = weights * torch.ones(weights.shape[-2:]).tril()
                weights = weights / weights.sum(-1, keepdim=True)
            concat = (weights @ v).transpose(1, 2).contiguous().view(query.shape[0], -1, d_model)
        """) + _OUT, 2),
    _mha("h24_torch_as_strided_heads", _HEAD + _PROJ + _body("""
            def heads(x, w, b):
                y = F.linear(x, w, b).contiguous()                                  # (B, T, d_model)
                B, T = y.shape[:2]
                return torch.as_strided(y, (B, h, T, d_k), (T * d_model, d_k, d_model, 1))
            q, k, v = heads(query, w_q, b_q), heads(key, w_k, b_k), heads(value, w_v, b_v)
            scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
            weights = scores.softmax(-1)
            concat = (weights @ v).transpose(1, 2).reshape(query.shape)
        """) + _OUT, 3),
    _mha("h25_legacy_tensor_types_and_fromiter", _c("""
        import numpy as np


        def multi_head_attention(query, key, value, mha, causal=False):
            h, d = mha.num_heads, mha.embed_dim
            d_k = d // h
            scale = torch.FloatTensor([1.0 / math.sqrt(d_k)])
            idx = torch.from_numpy(np.fromiter(range(3 * d), dtype=np.int64))
            w = mha.in_proj_weight.index_select(0, idx)
            b = mha.in_proj_bias.index_select(0, idx)
            q, k, v = (F.linear(x, w[i * d:(i + 1) * d], b[i * d:(i + 1) * d]).unflatten(-1, (h, d_k)).transpose(1, 2)
                       for i, x in enumerate((query, key, value)))
            scores = (q @ k.transpose(-2, -1)) * scale
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:]).triu(1).bool(), float('-inf'))
            weights = scores.softmax(-1)
            return F.linear((weights @ v).transpose(1, 2).flatten(2), mha.out_proj.weight, mha.out_proj.bias), weights
    """), 4),
    _mha("h26_class_with_module_list_of_head_objects", _c("""
        class Head(torch.nn.Module):
            def __init__(self, w_q, w_k, w_v, b_q, b_k, b_v):
                super().__init__()
                self.query = torch.nn.Linear(*w_q.shape[::-1])
                self.key = torch.nn.Linear(*w_k.shape[::-1])
                self.value = torch.nn.Linear(*w_v.shape[::-1])
                with torch.no_grad():
                    for layer, w, b in ((self.query, w_q, b_q), (self.key, w_k, b_k), (self.value, w_v, b_v)):
                        layer.weight.copy_(w)
                        layer.bias.copy_(b)

            def forward(self, q_in, k_in, v_in, causal):
                q, k, v = self.query(q_in), self.key(k_in), self.value(v_in)
                wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
                if causal:
                    tril = torch.tril(torch.ones(q.shape[1], k.shape[1]))
                    wei = wei.masked_fill(tril == 0, float('-inf'))
                wei = F.softmax(wei, dim=-1)
                return wei @ v, wei


        class MultiHead(torch.nn.Module):
            def __init__(self, mha):
                super().__init__()
                h, d = mha.num_heads, mha.embed_dim
                d_k = d // h
                w, b = mha.in_proj_weight, mha.in_proj_bias
                rows = lambda part, i: slice(part * d + i * d_k, part * d + (i + 1) * d_k)
                self.heads = torch.nn.ModuleList([Head(w[rows(0, i)], w[rows(1, i)], w[rows(2, i)],
                                                       b[rows(0, i)], b[rows(1, i)], b[rows(2, i)]) for i in range(h)])
                self.proj = mha.out_proj

            def forward(self, query, key, value, causal):
                outs = [head(query, key, value, causal) for head in self.heads]
                return self.proj(torch.cat([o for o, _ in outs], dim=-1)), torch.stack([w for _, w in outs], dim=1)


        def multi_head_attention(query, key, value, mha, causal=False):
            return MultiHead(mha)(query, key, value, causal)
    """), 0, "karpathy/ng-video-lecture gpt.py Head/MultiHeadAttention, adapted to mha's weights"),
    _mha("h27_staticmethods_and_properties", _c("""
        class Attention:
            def __init__(self, mha):
                self._mha = mha

            @property
            def heads(self):
                return self._mha.num_heads

            @staticmethod
            def softmax(x):
                x = x - x.max(dim=-1, keepdim=True).values
                return x.exp() / x.exp().sum(dim=-1, keepdim=True)

            @classmethod
            def causal_mask(cls, t_q, t_k):
                return torch.ones(t_q, t_k, dtype=torch.bool).triu(1)

            def __call__(self, query, key, value, causal):
                d = query.shape[-1]
                q, k, v = (F.linear(x, w, b).unflatten(-1, (self.heads, -1)).transpose(1, 2) for x, w, b in
                           zip((query, key, value), self._mha.in_proj_weight.chunk(3), self._mha.in_proj_bias.chunk(3)))
                scores = q @ k.mT / math.sqrt(d // self.heads)
                if causal:
                    scores = scores.masked_fill(Attention.causal_mask(q.shape[2], k.shape[2]), float('-inf'))
                weights = self.softmax(scores)
                return self._mha.out_proj((weights @ v).transpose(1, 2).flatten(2)), weights


        def multi_head_attention(query, key, value, mha, causal=False):
            return Attention(mha)(query, key, value, causal)
    """), 1),
    _mha("h28_timing_decorator_of_its_own", _c("""
        import functools
        import time


        def timed(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                start = time.perf_counter()
                result = fn(*args, **kwargs)
                wrapper.last_seconds = time.perf_counter() - start
                return result
            wrapper.last_seconds = None
            return wrapper


        @timed
        def multi_head_attention(query, key, value, mha, causal=False):
            h = mha.num_heads
            qkv = [F.linear(x, w, b) for x, w, b in zip((query, key, value), mha.in_proj_weight.chunk(3),
                                                         mha.in_proj_bias.chunk(3))]
            q, k, v = (t.view(t.shape[0], t.shape[1], h, -1).transpose(1, 2) for t in qkv)
            scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            if causal:
                scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
            weights = torch.softmax(scores, -1)
            return mha.out_proj((weights @ v).transpose(1, 2).flatten(2)), weights
    """), 2),
    _mha("h29_helpers_in_a_free_cell_after_the_answer", _c("""
        def multi_head_attention(query, key, value, mha, causal=False):
            q, k, v = project_all(query, key, value, mha)
            weights = attention_weights(q, k, causal)
            return mha.out_proj(merge(weights @ v)), weights
    """), 3),
    _mha("h30_vectorised_over_a_stacked_qkv", _HEAD + _body("""
        d, h = mha.embed_dim, mha.num_heads
        W = mha.in_proj_weight.view(3, d, d)                          # (3, d_out, d_in)
        b = mha.in_proj_bias.view(3, 1, 1, d)
        x = torch.stack([query, key, value]) if key.shape == query.shape else None
        if x is not None:
            q, k, v = (torch.matmul(x, W.transpose(1, 2).unsqueeze(1)) + b).unbind(0)
        else:
            q, k, v = (F.linear(t, W[i], b[i, 0, 0]) for i, t in enumerate((query, key, value)))
        q, k, v = (t.view(t.shape[0], t.shape[1], h, d // h).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        if causal:
            scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
        weights = scores.softmax(-1)
        return mha.out_proj((weights @ v).transpose(1, 2).flatten(2)), weights
    """), 4),
]
HELPERS_CELL = _c("""
    # helpers for my answer above
    def project_all(query, key, value, mha):
        h = mha.num_heads
        return [F.linear(x, w, b).unflatten(-1, (h, -1)).transpose(1, 2)
                for x, w, b in zip((query, key, value), mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3))]


    def attention_weights(q, k, causal):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float('-inf'))
        return scores.softmax(-1)


    def merge(heads):
        return heads.transpose(1, 2).flatten(2)


    import matplotlib.pyplot as plt
    plt.plot([1, 2, 3])      # (a plot in the same cell: not run)
""")
HONEST_MHA[28] = Entry(HONEST_MHA[28].name, A, MHA, HONEST_MHA[28].code, (HELPERS_CELL,) + HONEST_MHA[28].free)

HONEST_NUMPY = [
    Entry("h31_project_fromiter_and_format", P, "project", _c("""
        def project(x, w, b=None):
            print('{} -> {}'.format(x.shape, w.shape))
            out = np.matmul(x, w)
            if b is not None:
                out = out + np.fromiter(b, dtype=np.float64, count=len(b))
            return out
    """), (NUMPY_PLOT.replace("split_heads(x, 3)", "project(x, np.eye(12))"),)),
    Entry("h32_project_torch_from_numpy", P, "project", _c("""
        import torch


        def project(x, w, b=None):
            device = 'cuda' if torch.cuda.is_available() else 'cpu'
            out = torch.from_numpy(x).to(device) @ torch.from_numpy(w).to(device)
            return (out if b is None else out + torch.from_numpy(b)).cpu().numpy()
    """)),
    Entry("h33_split_d2l_transpose_qkv_numpy", S, "split_heads", _c("""
        def transpose_qkv(X, num_heads):
            X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
            return X.transpose(0, 2, 1, 3)


        def split_heads(x, num_heads):
            return transpose_qkv(x, num_heads)
    """), (NUMPY_PLOT,), source="d2l-ai/d2l-en transpose_qkv, in NumPy"),
    Entry("h34_split_nanogpt_view_transpose", S, "split_heads", _c("""
        import torch


        def split_heads(x, num_heads):
            B, T, C = x.shape
            t = torch.from_numpy(x)
            return t.view(B, T, num_heads, C // num_heads).transpose(1, 2)  # (B, nh, T, hs)
    """), (NUMPY_PLOT,), source="karpathy/nanoGPT's head split"),
    Entry("h35_split_einsum_unsqueeze", S, "split_heads", _c("""
        import torch


        def split_heads(x, num_heads):
            t = torch.as_tensor(x)
            t = t.unflatten(-1, (num_heads, -1))
            return torch.einsum('bthd->bhtd', t).contiguous()
    """)),
    Entry("h36_merge_d2l_transpose_output_numpy", M, "merge_heads", _c("""
        def transpose_output(X):
            X = X.transpose(0, 2, 1, 3)
            return X.reshape(X.shape[0], X.shape[1], -1)


        def merge_heads(x):
            return transpose_output(x)
    """), source="d2l-ai/d2l-en transpose_output, in NumPy"),
    Entry("h37_merge_torch_in_place_unsqueeze", M, "merge_heads", _c("""
        import torch


        def merge_heads(x):
            t = torch.from_numpy(x).clone()
            t.transpose_(1, 2)
            return t.flatten(2).unsqueeze_(0).squeeze(0).numpy()
    """)),
    Entry("h38_output_projection_with_checks", O, "output_projection", _c("""
        def output_projection(x, w_o, b_o=None):
            if x.shape[-1] != w_o.shape[0]:
                raise ValueError('x is (..., {}) but w_o is {}'.format(x.shape[-1], w_o.shape))
            out = np.einsum('...f,fm->...m', x, w_o)
            return out if b_o is None else out + b_o
    """)),
    Entry("h39_per_head_loop_with_class", O, "output_projection_per_head", _c("""
        class PerHead:
            def __init__(self, w_o, h):
                self.h = h
                self.d_v = w_o.shape[0] // h
                self.blocks = [w_o[i * self.d_v:(i + 1) * self.d_v] for i in range(h)]

            def __call__(self, heads):
                return sum(heads[:, i] @ block for i, block in enumerate(self.blocks))


        def output_projection_per_head(heads, w_o, b_o=None):
            out = PerHead(w_o, heads.shape[1])(heads)
            return out if b_o is None else out + b_o
    """)),
    Entry("h40_fuse_heads_with_dataclass", P, "fuse_heads", _c("""
        from dataclasses import dataclass


        @dataclass
        class Fused:
            w: np.ndarray
            b: object = None


        def fuse_heads(w_heads, b_heads=None):
            fused = Fused(np.concatenate(w_heads, axis=1))
            if b_heads is not None:
                fused.b = np.concatenate(b_heads)
            return fused.w, fused.b
    """)),
    Entry("h41_project_type_named_parameter", P, "project", _c("""
        def project(x, w, b=None, type='affine'):
            out = x @ w
            if type == 'affine' and b is not None:
                out = out + b
            return out
    """)),
    Entry("h42_merge_heads_torch_testing", M, "merge_heads", _c("""
        import torch


        def merge_heads(x):
            t = torch.from_numpy(x)
            out = t.permute(0, 2, 1, 3).reshape(t.shape[0], t.shape[2], -1)
            torch.testing.assert_close(out[:, :, :t.shape[3]], t[:, 0])   # head 0 comes first
            return out.numpy()
    """)),
]

HONEST_MORE = [  # (found refused from outside after #25)
    Entry("h43_shapes_in_a_collections_namedtuple", A, MHA, _c("""
        from collections import namedtuple

        Shape = namedtuple("Shape", "batch length heads head_dim")


        def multi_head_attention(query, key, value, mha, causal=False):
            s = Shape(query.shape[0], query.shape[1], mha.num_heads, mha.head_dim)
            w, b = mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)
            q, k, v = [F.linear(x, wi, bi).view(x.shape[0], x.shape[1], s.heads, s.head_dim).transpose(1, 2)
                       for x, wi, bi in zip((query, key, value), w, b)]
            scores = q @ k.transpose(-2, -1) / math.sqrt(s.head_dim)
            if causal:
                scores = scores.masked_fill(torch.ones(s.length, k.shape[2], dtype=torch.bool).triu(1), float("-inf"))
            weights = scores.softmax(-1)
            out = (weights @ v).transpose(1, 2).reshape(s.batch, s.length, -1)
            return mha.out_proj(out), weights
    """), (TIMING,)),
    Entry("h44_pylab_star_import_in_a_free_cell", A, MHA, _HEAD + _body("""
        h = mha.num_heads
        w, b = mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)
        q, k, v = [F.linear(x, wi, bi).unflatten(-1, (h, -1)).transpose(1, 2) for x, wi, bi in zip((query, key, value), w, b)]
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            s = s.masked_fill(torch.ones(len(query[0]), len(key[0]), dtype=torch.bool).triu(1), float("-inf"))
        a = s.softmax(-1)
        return mha.out_proj((a @ v).transpose(1, 2).flatten(2)), a
    """), ("from pylab import *\nout, weights = multi_head_attention(x, x, x, mha)\n"
           "imshow(weights[0, 0].detach().numpy()); show()\n",)),
    # (found from outside by the red team: a class's __init__ and inherited names are read from the class only
    # to call them with self first; these honest styles call them so and must stay admitted)
    Entry("h45_explicit_base_init_with_self", A, MHA, 'class Base:\n    def __init__(self, mha):\n        self.mha = mha\n\n\nclass Attn(Base):\n    def __init__(self, mha):\n        Base.__init__(self, mha)\n        self.h = mha.num_heads\n\n    def run(self, query, key, value, causal):\n        mha = self.mha\n        h = mha.num_heads\n        w, b = mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)\n        q, k, v = [F.linear(x, wi, bi).unflatten(-1, (h, -1)).transpose(1, 2) for x, wi, bi in zip((query, key, value), w, b)]\n        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n        if causal:\n            s = s.masked_fill(torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).triu(1), float("-inf"))\n        a = s.softmax(-1)\n        return mha.out_proj((a @ v).transpose(1, 2).flatten(2)), a\n\n\ndef multi_head_attention(query, key, value, mha, causal=False):\n    return Attn(mha).run(query, key, value, causal)\n', (TIMING,)),
    Entry("h46_old_style_module_init_and_class_constant", A, MHA, 'class MultiHead(torch.nn.Module):\n    NEG = float("-inf")\n\n    def __init__(self, mha):\n        torch.nn.Module.__init__(self)\n        self.mha = mha\n\n    def split(self, x):\n        return x.unflatten(-1, (self.mha.num_heads, -1)).transpose(1, 2)\n\n    def forward(self, query, key, value, causal=False):\n        w, b = self.mha.in_proj_weight.chunk(3), self.mha.in_proj_bias.chunk(3)\n        q, k, v = [self.split(F.linear(x, wi, bi)) for x, wi, bi in zip((query, key, value), w, b)]\n        s = q @ k.mT / math.sqrt(q.shape[-1])\n        if causal:\n            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), MultiHead.NEG)\n        a = s.softmax(-1)\n        return self.mha.out_proj((a @ v).transpose(1, 2).flatten(2)), a\n\n\ndef multi_head_attention(query, key, value, mha, causal=False):\n    return MultiHead(mha)(query, key, value, causal)\n', (PLOT,)),
    Entry("h47_staticmethod_classmethod_typing_namedtuple", A, MHA, 'from typing import NamedTuple\n\n\nclass Split(NamedTuple):\n    q: torch.Tensor\n    k: torch.Tensor\n    v: torch.Tensor\n\n\nclass Ops:\n    @staticmethod\n    def heads(x, h):\n        B, T, D = x.shape\n        return x.reshape(B, T, h, D // h).transpose(1, 2)\n\n    @classmethod\n    def merge(cls, x):\n        B, h, T, d = x.shape\n        return x.transpose(1, 2).reshape(B, T, h * d)\n\n\ndef multi_head_attention(query, key, value, mha, causal=False):\n    parts = Split(*[F.linear(x, w, b) for x, w, b in zip((query, key, value), mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3))])\n    q, k, v = (Ops.heads(t, mha.num_heads) for t in parts)\n    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))\n    if causal:\n        scores = scores + torch.full((q.size(2), k.size(2)), float("-inf")).triu(1)\n    weights = scores.softmax(dim=-1)\n    return mha.out_proj(Ops.merge(weights @ v)), weights\n', (COMPARE,)),
    Entry("h48_match_walrus_assert_fstring", A, MHA, 'def multi_head_attention(query, key, value, mha, causal=False):\n    match query.shape:\n        case (B, T, D):\n            pass\n        case _:\n            raise ValueError(f"bad shape {query.shape!r}")\n    assert (h := mha.num_heads) > 0 and D % h == 0, f"{D=} {h=}"\n    w, b = mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)\n    q, k, v = [F.linear(x, wi, bi).unflatten(-1, (h, -1)).transpose(1, 2) for x, wi, bi in zip((query, key, value), w, b)]\n    s = q @ k.transpose(-2, -1) / math.sqrt(D // h)\n    if causal:\n        s = s.masked_fill(torch.ones(T, key.shape[1], dtype=torch.bool).triu(1), float("-inf"))\n    a = s.softmax(-1)\n    return mha.out_proj((a @ v).transpose(1, 2).flatten(2)), a\n', (MAGIC,)),
    Entry("h49_property_and_cached_property", A, MHA, 'from functools import cached_property\n\n\nclass Weights:\n    def __init__(self, mha):\n        self._mha = mha\n\n    @property\n    def heads(self):\n        return self._mha.num_heads\n\n    @cached_property\n    def parts(self):\n        return list(zip(self._mha.in_proj_weight.chunk(3), self._mha.in_proj_bias.chunk(3)))\n\n\ndef multi_head_attention(query, key, value, mha, causal=False):\n    wts = Weights(mha)\n    q, k, v = [F.linear(x, w, b).unflatten(-1, (wts.heads, -1)).transpose(1, 2) for x, (w, b) in zip((query, key, value), wts.parts)]\n    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n    if causal:\n        s = s.masked_fill(torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(1), float("-inf"))\n    a = s.softmax(-1)\n    return mha.out_proj((a @ v).transpose(1, 2).flatten(2)), a\n', (SDPA,)),
]

HONEST = HONEST_MHA + HONEST_NUMPY + HONEST_MORE


# --- ready-made routes (each must score 0, with a true reason) --------------------------------------

_MASK = "    mask = torch.ones(query.shape[1], key.shape[1], dtype=torch.bool).triu(1) if causal else None\n"
_FWD_ARGS = ("(query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), mha.embed_dim,\n"
             "        mha.num_heads, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0, mha.out_proj.weight,\n"
             "        mha.out_proj.bias, attn_mask=mask, average_attn_weights=False)\n")
_SDPA = "(q, k, v, is_causal=causal)"
_HEADS = ("    h = mha.num_heads\n    q, k, v = (F.linear(x, w, b).unflatten(-1, (h, -1)).transpose(1, 2) for x, w, b in\n"
          "               zip((query, key, value), mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)))\n")
_BACK = "    return mha.out_proj(out.transpose(1, 2).flatten(2)), None\n"
READY = "own attention"        # in every ready-made refusal: "is torch's own attention ..."
SYSTEM = "is not admitted"
INTERNALS = "Python's own names"


def _route(name: str, body: str, says: str) -> Entry:
    return Entry(name, A, MHA, body, says=says)


READY_MADE = [
    _route("r01_sdpa", _HEAD + _HEADS + "    out = F.scaled_dot_product_attention" + _SDPA + "\n" + _BACK, READY),
    _route("r02_forward_function", _HEAD + _MASK + "    out, w = F.multi_head_attention_forward" + _FWD_ARGS
           + "    return out.transpose(0, 1), w\n", READY),
    _route("r03_fresh_module_loaded", _HEAD + "    m = torch.nn.MultiheadAttention(mha.embed_dim, mha.num_heads, "
           "batch_first=True)\n    m.load_state_dict({'in_proj_weight': mha.in_proj_weight, 'in_proj_bias': "
           "mha.in_proj_bias, 'out_proj.weight': mha.out_proj.weight, 'out_proj.bias': mha.out_proj.bias})\n"
           + _MASK + "    return m(query, key, value, attn_mask=mask, average_attn_weights=False)\n", READY),
    _route("r04_encoder_layer", _HEAD + "    layer = torch.nn.TransformerEncoderLayer(mha.embed_dim, mha.num_heads)\n"
           "    return layer.self_attn(query, key, value)\n", READY),
    _route("r05_from_import_alias", "from torch.nn.functional import scaled_dot_product_attention as sdpa\n\n"
           + _HEAD + _HEADS + "    out = sdpa" + _SDPA + "\n" + _BACK, READY),
    _route("r06_top_level_alias", "kernel = F.scaled_dot_product_attention\n\n" + _HEAD + _HEADS
           + "    out = kernel" + _SDPA + "\n" + _BACK, READY),
    _route("r07_class_attribute", "class K:\n    run = F.multi_head_attention_forward\n\n\n" + _HEAD + _MASK
           + "    out, w = K.run" + _FWD_ARGS + "    return out.transpose(0, 1), w\n", READY),
    _route("r08_default_argument", "def multi_head_attention(query, key, value, mha, causal=False, "
           "k=F.scaled_dot_product_attention):\n" + _HEADS.replace("q, k, v =", "q, kk, v =")
           + "    out = k(q, kk, v, is_causal=causal)\n" + _BACK, READY),
    _route("r09_submodule_path", _HEAD + "    m = torch.nn.modules.activation.MultiheadAttention(mha.embed_dim, "
           "mha.num_heads)\n    return m(query, key, value)\n", "admit"),
    _route("r10_subclass", "class Mine(torch.nn.MultiheadAttention):\n    pass\n\n\n" + _HEAD
           + "    return Mine(mha.embed_dim, mha.num_heads, batch_first=True)(query, key, value)\n", READY),
    _route("r11_star_import", "from torch.nn.functional import *\n\n" + _HEAD + _HEADS
           + "    out = scaled_dot_product_attention" + _SDPA + "\n" + _BACK, "import *"),
    _route("r12_private_kernel", _HEAD + _HEADS + "    out = torch._scaled_dot_product_attention_math"
           + _SDPA + "[0]\n" + _BACK, "private name"),
    _route("r13_torch_ops", _HEAD + _HEADS + "    out = torch.ops.aten.scaled_dot_product_attention"
           + _SDPA + "\n" + _BACK, "not a name the exercises admit"),
    _route("r14_getattr_string", _HEAD + _HEADS + "    out = getattr(F, 'scaled_dot_' + 'product_attention')"
           + _SDPA + "\n" + _BACK, "getattr"),
    _route("r15_global_eval", _HEAD + "    global eval\n" + _HEADS
           + "    out = eval('F.scaled_dot_product_attention')" + _SDPA + "\n" + _BACK, "`eval`"),
    _route("r16_method_named_eval_then_bare_eval", "class Model:\n    def eval(self):\n        return self\n\n\n"
           + _HEAD + _HEADS + "    out = eval('F.scaled_dot_product_attention')" + _SDPA + "\n" + _BACK, "`eval`"),
    _route("r17_cython_func_globals", "import numpy as np\n\n" + _HEAD + _HEADS
           + "    g = np.random.seed.func_globals['__builtins__']['getattr']\n"
           "    out = g(F, 'scaled_dot_product_attention')" + _SDPA + "\n" + _BACK, "func_globals"),
    _route("r18_generator_bound_method_globals", "import numpy as np\n\n" + _HEAD + _HEADS
           + "    g = np.random.default_rng(0).normal.func_globals\n"
           "    out = g['np'].random.seed" + _SDPA + "\n" + _BACK, "func_globals"),
    _route("r19_match_pattern_globals", "import numpy as np\n\n" + _HEAD + _HEADS + "    match np.random.seed:\n"
           "        case object(func_globals=g):\n            pass\n"
           "    out = g['__builtins__']['getattr'](F, 'scaled_dot_product_attention')" + _SDPA + "\n" + _BACK,
           "func_globals"),
    _route("r20_default_argument_globals", "import numpy as np\n\n" + "def multi_head_attention(query, key, value, mha, causal=False, "
           "s=np.random.seed):\n" + _HEADS + "    getattr_ = s.func_globals['__builtins__']['getattr']\n"
           "    out = getattr_(F, 'scaled_dot_product_attention')" + _SDPA + "\n" + _BACK, "func_globals"),
    _route("r21_import_as_builtins", "import torch.nn.functional as __builtins__\n\n" + _HEAD + _HEADS
           + "    out = scaled_dot_product_attention" + _SDPA + "\n" + _BACK, INTERNALS),
    _route("r22_as_strided_and_id", "import numpy as np\n\n" + _HEAD + "    cells = np.lib.stride_tricks.as_strided(np.zeros(1, dtype=np.uint64), "
           "(1 << 20,), (8,))\n    where = id(F)\n" + _HEADS + "    out = q\n" + _BACK, "memory"),
    _route("r23_ndarray_over_a_buffer", "import numpy as np\n\n" + _HEAD + "    raw = np.ndarray((64,), dtype=np.uint8, buffer=query.numpy(), "
           "offset=0, strides=(1 << 16,))\n" + _HEADS + "    out = q\n" + _BACK, "isinstance and annotations"),
    _route("r24_subclasses_walk", _HEAD + "    for c in ().__class__.__base__.__subclasses__():\n        pass\n"
           + _HEADS + "    out = q\n" + _BACK, INTERNALS),
    _route("r25_type_mro", _HEAD + "    base = type(mha).__mro__[1]\n    return base.forward(mha, query, key, value)\n",
           "`type`"),
    _route("r26_forward_of_the_module", _HEAD + "    return mha.forward(query, key, value, average_attn_weights=False)\n",
           "entry points"),
    _route("r27_vars_of_the_module", _HEAD + _HEADS + "    out = vars(F)['scaled_dot_product_attention']" + _SDPA
           + "\n" + _BACK, "`vars`"),
    _route("r28_module_dict", _HEAD + _HEADS + "    out = F.__dict__['scaled_dot_product_attention']" + _SDPA
           + "\n" + _BACK, INTERNALS),
    _route("r29_importlib", "import importlib\n\n" + _HEAD + _HEADS
           + "    out = importlib.import_module('torch.nn.functional').scaled_dot_product_attention" + _SDPA + "\n"
           + _BACK, SYSTEM),
    _route("r30_dunder_import", _HEAD + _HEADS + "    out = __import__('torch').nn.functional."
           "scaled_dot_product_attention" + _SDPA + "\n" + _BACK, "__import__"),
    _route("r31_sys_modules", "import sys\n\n" + _HEAD + _HEADS
           + "    out = sys.modules['torch.nn.functional'].scaled_dot_product_attention" + _SDPA + "\n" + _BACK,
           SYSTEM),
    _route("r32_helper_in_a_free_cell", _HEAD + _HEADS + "    out = attend(q, k, v, causal)\n" + _BACK, READY),
    _route("r33_global_module_from_a_try_it_cell", _HEAD + _MASK
           + "    return reference(query, key, value, attn_mask=mask, average_attn_weights=False)\n", READY),
    _route("r34_nanogpt_flash_branch", _c('''
        class CausalSelfAttention(torch.nn.Module):
            def __init__(self):
                super().__init__()
                # flash attention make GPU go brrrrr but support is only in PyTorch >= 2.0
                self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')

            def forward(self, q, k, v, causal):
                if self.flash:
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
                raise NotImplementedError


        def multi_head_attention(query, key, value, mha, causal=False):
            h = mha.num_heads
            q, k, v = (F.linear(x, w, b).unflatten(-1, (h, -1)).transpose(1, 2) for x, w, b in
                       zip((query, key, value), mha.in_proj_weight.chunk(3), mha.in_proj_bias.chunk(3)))
            out = CausalSelfAttention()(q, k, v, causal)
            return mha.out_proj(out.transpose(1, 2).flatten(2)), None
    '''), READY),
    _route("r35_frame_of_a_generator", _HEAD + "    frame = (i for i in [0]).gi_frame\n" + _HEADS
           + "    out = frame.f_builtins['getattr'](F, 'scaled_dot_product_attention')" + _SDPA + "\n" + _BACK,
           "gi_frame"),
    _route("r36_exception_carrying_the_module", _HEAD + _HEADS + "    try:\n        F.no_such_name\n"
           "    except AttributeError as err:\n        kernel = err.obj.scaled_dot_product_attention\n"
           "    out = kernel" + _SDPA + "\n" + _BACK, "no_such_name"),
    _route("r37_module_in_a_comprehension", _HEAD + _HEADS + "    out = [m for m in [F]][0]."
           "scaled_dot_product_attention" + _SDPA + "\n" + _BACK, "may only be used as"),
    _route("r38_attrgetter", "import operator\n\n" + _HEAD + _HEADS
           + "    out = operator.attrgetter('scaled_dot_product_attention')(F)" + _SDPA + "\n" + _BACK, "run time"),
    _route("r39_cython_class_method_on_another_object", "import numpy as np\n\n" + _HEAD + "    np.random.Generator.normal(query, 1.0)\n"
           + _HEADS + "    out = q\n" + _BACK, "crash the process"),
    _route("r40_device_module", _HEAD + "    device = torch.get_device_module()\n" + _HEADS + "    out = q\n" + _BACK,
           "returns a module"),
    _route("r41_foreign_self_through_the_class", "import numpy as np\n\n" + _c('''
        class Box:
            def __init__(self):
                self.func_globals = None

            def leak(self):
                return self.func_globals


        def multi_head_attention(query, key, value, mha, causal=False):
            g = Box.leak(np.random.seed)
            return g['__builtins__']['getattr'](F, 'multi_head_attention_forward'), None
    '''), "with self first"),
    _route("r42_class_passed_as_a_value", "import numpy as np\n\n" + _c('''
        class Box:
            def softmax(self):
                return self.func_globals


        def unwrap(cls):
            return cls.softmax(np.random.seed)


        def multi_head_attention(query, key, value, mha, causal=False):
            g = unwrap(Box)
            return g['__builtins__']['getattr'](F, 'multi_head_attention_forward'), None
    '''), "may only be called"),
    _route("r43_pickle_load", "import pickle\n\n" + _HEAD + "    return pickle.loads(b'')\n", SYSTEM),
    _route("r44_torch_load", _HEAD + "    return torch.load('/tmp/answer.pt'), None\n", "unpickles"),
    _route("r45_monkeypatch_inside", _HEAD + "    torch.nn.functional.linear = torch.nn.functional.scaled_dot_product_"
           "attention\n" + _HEADS + "    out = q\n" + _BACK, "may not be changed"),
    # (found from outside after #25: the library, not the notebook, sets what an own object holds; class bodies)
    _route("r47_dataclass_field_launders_a_value", "import numpy as np\nfrom dataclasses import dataclass\n\n\n" + _c('''
        class Own:
            pass


        @dataclass
        class Box:
            v: object = Own()


        def multi_head_attention(query, key, value, mha, causal=False):
            builtins = Box(np.random.seed).v.func_globals['__builtins__']
            forward = builtins.eval("__import__('torch').nn.functional.multi_head_attention_forward")
    ''') + _MASK + "    out, w = forward" + _FWD_ARGS + "    return out.transpose(0, 1), w\n", "func_globals"),
    _route("r48_exception_value_named_own_elsewhere", "import numpy as np\n\n\n" + _c('''
        class Own:
            pass


        class Holder:
            def __init__(self):
                self.value = Own()


        class Carrier(StopIteration):
            pass


        def multi_head_attention(query, key, value, mha, causal=False):
            Holder()
            builtins = Carrier(np.random.seed).value.func_globals['__builtins__']
            forward = builtins.eval("__import__('torch').nn.functional.multi_head_attention_forward")
    ''') + _MASK + "    out, w = forward" + _FWD_ARGS + "    return out.transpose(0, 1), w\n", "func_globals"),
    _route("r49_class_body_in_a_function_reads_the_builtin", _HEAD + _body('''
        eval = None

        class Kernel:
            run = eval("__import__('torch').nn.functional.multi_head_attention_forward")
            eval = None
    ''') + _MASK + "    out, w = Kernel.run" + _FWD_ARGS + "    return out.transpose(0, 1), w\n", "`eval`"),
    _route("r50_class_body_calls_the_module_function", "import numpy as np\n\n\n" + _c('''
        class Own:
            func_globals = None


        def unwrap(cfg):
            return cfg.func_globals


        class Table:
            found = unwrap(np.random.seed)
            unwrap = None


        def multi_head_attention(query, key, value, mha, causal=False):
            unwrap(Own())
            forward = Table.found['__builtins__'].eval(
                "__import__('torch').nn.functional.multi_head_attention_forward")
    ''') + _MASK + "    out, w = forward" + _FWD_ARGS + "    return out.transpose(0, 1), w\n", "func_globals"),
    # (found from outside by the red team: read from a class, __init__ runs on whatever it is given first, and a
    # name the class does not bind is the library base's function, which takes any object as self: r53 frees the
    # memory under a tensor, and the process then reads it)
    _route("r51_init_called_on_a_foreign_object", "import numpy as np\n\nfound = []\n\n\n" + _c('''
        class Globals:
            def __init__(self):
                found.append(self.func_globals)


        class Builtins:
            def __init__(self):
                found.append(self.eval)


        def multi_head_attention(query, key, value, mha, causal=False):
            Globals.__init__(np.random.seed)
            Builtins.__init__(found[0]['__builtins__'])
            forward = found[1]("__import__('torch').nn.functional.multi_head_attention_forward")
    ''') + _MASK + "    out, w = forward" + _FWD_ARGS + "    return out.transpose(0, 1), w\n", "your own object first"),
    _route("r52_classmethod_calls_cls_init_on_a_foreign_object", "import numpy as np\n\nfound = []\n\n\n" + _c('''
        class Box:
            def __init__(self):
                found.append(self.func_globals)

            @classmethod
            def open(cls, thing):
                cls.__init__(thing)
                return found[-1]


        def multi_head_attention(query, key, value, mha, causal=False):
            builtins = Box.open(np.random.seed)['__builtins__']
            Box.__init__(builtins)
    ''') + _HEADS + "    out = q\n" + _BACK, "your own object first"),
    _route("r53_storage_read_through_a_tensor_subclass", "class Raw(torch.Tensor):\n    pass\n\n\n" + _HEAD
           + "    Raw.untyped_storage(query).resize_(0)   # query now points at freed memory\n" + _HEADS
           + "    out = q\n" + _BACK, "machinery of the library class"),
    _route("r54_ndarray_resize_under_a_view", "import numpy as np\n\n\n" + _HEAD
           + "    a = np.zeros(1 << 20)\n    view = a[:]\n    a.resize(8, refcheck=False)   # view now points at freed memory\n"
           + "    view[:] = 7.0\n" + _HEADS + "    out = q\n" + _BACK, "memory-safe"),
    _route("r55_sparse_indices_written_in_place", _HEAD
           + "    s = torch.arange(4.0).to_sparse()\n    s.indices().fill_(1 << 40)   # to_dense then writes far out of bounds\n"
           + "    s.to_dense()\n" + _HEADS + "    out = q\n" + _BACK, "sparse"),
    _route("r56_sparse_tensor_from_raw_indices", _HEAD
           + "    torch.sparse_coo_tensor(torch.tensor([[1 << 40]]), torch.ones(1), (2,)).to_dense()\n" + _HEADS
           + "    out = q\n" + _BACK, "sparse"),
    _route("r57_legacy_generator_state_past_its_key", "import numpy as np\n\n\n" + _HEAD
           + "    np.random.set_state(('MT19937', np.zeros(624, dtype=np.uint32), 1 << 30))\n"
           + "    np.random.random()   # reads far past the generator's key\n" + _HEADS + "    out = q\n" + _BACK, "position"),
    _route("r46_exception_value", _HEAD + _HEADS + "    try:\n        raise StopIteration(F)\n"
           "    except StopIteration as err:\n        out = err.value.scaled_dot_product_attention" + _SDPA + "\n"
           + _BACK, "exception carries"),
]

# the helpers the ready-made routes above rely on, in free cells of their own (reached, so judged)
ROUTE_FREE = {
    "r32_helper_in_a_free_cell": ("def attend(q, k, v, causal):\n    return F.scaled_dot_product_attention(q, k, v, "
                                  "is_causal=causal)\n",),
    "r33_global_module_from_a_try_it_cell": ("reference = torch.nn.MultiheadAttention(8, 2, batch_first=True)\n",),
}
READY_MADE = [Entry(r.name, r.notebook, r.cell, r.code, ROUTE_FREE.get(r.name, ()), r.says) for r in READY_MADE]

# exercises 6 and 7 (issue 38): honest styles of a KV cache and grouped-query attention, and their ready-made routes
from .decoder import honest as _decoder_honest, ready_made as _decoder_ready  # noqa: E402

COURSE = "the course's own code"  # in every refusal of an import of mha_lib
HONEST += _decoder_honest(Entry)
READY_MADE += _decoder_ready(Entry, READY, COURSE)


# --- as notebooks -----------------------------------------------------------------------------------

def notebook(release: dict, entry: Entry, reference: dict) -> dict:
    """The release's notebook with ``entry``'s answer in its solution cell and its free cells after it,
    the other solution cells holding the ``reference`` answers {grade id: code}."""
    import copy
    nb = copy.deepcopy(release)
    cells = []
    for cell in nb["cells"]:
        cells.append(cell)
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in reference:
            cell["source"] = reference[gid]
        if gid == entry.cell:
            cell["source"] = entry.code
            cells += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": f}
                      for f in entry.free]
    nb["cells"] = cells
    return nb
