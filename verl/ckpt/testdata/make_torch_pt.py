"""Writes .pt files laid out as torch.save writes them, without PyTorch.

Stub modules give pickle the globals torch.save emits (torch._utils.
_rebuild_tensor_v2, torch.FloatStorage, ...); storages are persistent ids
whose bytes go to <archive>/data/<key>, as in PyTorch's zip format.

  make_torch_pt.py DIR table   reader test cases (good and refused files)
  make_torch_pt.py DIR ckpt    a 2-rank verl-style checkpoint of OrderedDicts
"""
import collections, pickle, struct, sys, types, zipfile
def module(name):
    m = types.ModuleType(name); sys.modules[name] = m; return m
def define(mod, name, obj):
    obj.__module__ = mod.__name__; obj.__qualname__ = name; obj.__name__ = name
    setattr(mod, name, obj); return obj
torch = module('torch'); utils = module('torch._utils'); tt = module('torch._tensor')
module('torch.distributed'); dist = module('torch.distributed.tensor')
module('numpy'); module('numpy.core'); npm = module('numpy.core.multiarray')
v2 = define(utils, '_rebuild_tensor_v2', lambda *a: None)
param = define(utils, '_rebuild_parameter', lambda *a: None)
from_type = define(tt, '_rebuild_from_type_v2', lambda *a: None)
recon = define(npm, '_reconstruct', lambda *a: None)
S = {n: define(torch, n, type(n, (), {})) for n in
     ['FloatStorage', 'BFloat16Storage', 'LongStorage', 'BoolStorage']}
DTensor = define(dist, 'DTensor', type('DTensor', (), {}))
class Storage:
    def __init__(self, cls, key, fmt, values, numel=None):
        self.cls, self.key = S[cls], key
        self.raw = struct.pack('<%d%s' % (len(values), fmt), *values)
        self.numel = len(values) if numel is None else numel
class T:
    def __init__(self, st, off, size, stride): self.a = (st, off, size, stride)
    def __reduce__(self):
        st, off, size, stride = self.a
        return (v2, (st, off, size, stride, False, collections.OrderedDict()))
class Param:
    def __init__(self, t): self.t = t
    def __reduce__(self): return (param, (self.t, True, collections.OrderedDict()))
class DT:
    def __init__(self, t): self.t = t
    def __reduce__(self): return (from_type, (v2, DTensor, self.t.__reduce__()[1], {}))
class Np:
    def __reduce__(self): return (recon, (0, (1,), b'b'))
def save(path, obj, protocol=2, byteorder='little', skip_records=()):
    stems = path.split('/')[-1][:-3]
    storages = {}
    class P(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, Storage):
                storages[o.key] = o.raw
                return ('storage', o.cls, o.key, 'cpu', o.numel)
            return None
    import io
    buf = io.BytesIO(); P(buf, protocol=protocol).dump(obj)
    z = zipfile.ZipFile(path, 'w')
    z.writestr(stems + '/data.pkl', buf.getvalue())
    z.writestr(stems + '/byteorder', byteorder)
    for k, raw in storages.items():
        if k not in skip_records: z.writestr(stems + '/data/' + k, raw)
    z.writestr(stems + '/version', '3\n')
    z.close()
def good():
    s0 = Storage('FloatStorage', '0', 'f', [float(i) for i in range(12)])
    bf = Storage('BFloat16Storage', '1', 'H', [0x3F80, 0xC000, 0x3F00])
    ids = Storage('LongStorage', '2', 'q', [7, -3, 1 << 40])
    flag = Storage('BoolStorage', '3', 'B', [1, 0])
    one = Storage('FloatStorage', '4', 'f', [1.5])
    return [('w', T(s0, 0, (3, 4), (4, 1))), ('wt', T(s0, 0, (4, 3), (1, 4))),
            ('row', T(s0, 4, (4,), (1,))), ('b', T(bf, 0, (3,), (1,))),
            ('ids', T(ids, 0, (3,), (1,))), ('flag', T(flag, 0, (2,), (1,))),
            ('p', Param(T(one, 0, (), ()))), ('empty', T(one, 0, (0, 5), (5, 1)))]
def table(d):
    od = collections.OrderedDict(good())
    od._metadata = collections.OrderedDict([('', {'version': 1})])
    save(d + '/od_meta.pt', od)
    save(d + '/dict_p2.pt', dict(good()))
    save(d + '/dict_p4.pt', dict(good()), protocol=4)
    s = Storage('FloatStorage', '0', 'f', [1.0, 2.0])
    save(d + '/dtensor.pt', collections.OrderedDict([('w', DT(T(s, 0, (2,), (1,))))]))
    save(d + '/numpy.pt', {'x': Np()})
    save(d + '/bigendian.pt', {'w': T(s, 0, (2,), (1,))}, byteorder='big')
    save(d + '/missing_record.pt', {'w': T(s, 0, (2,), (1,))}, skip_records=('0',))
    save(d + '/too_small.pt', {'w': T(Storage('FloatStorage', '0', 'f', [1.0], numel=4), 0, (4,), (1,))})
    save(d + '/out_of_storage.pt', {'w': T(s, 1, (2,), (1,))})
    save(d + '/nested.pt', {'a': {'b': T(s, 0, (2,), (1,))}})
    save(d + '/int_key.pt', {3: T(s, 0, (2,), (1,))})

def ckpt(d):
    """verl's layout for 2 ranks without shard layout: dim-0 chunks as
    torch.chunk gives them; rank 1's tensors are views of one flat storage."""
    import json, os
    actor = d + '/global_step_1/actor'
    os.makedirs(actor + '/huggingface', exist_ok=True)
    full = {'model.embed_tokens.weight': ([i * 0.5 for i in range(15)], (5, 3)),
            'model.norm.weight': ([1.0, 2.0, 3.0], (3,)),
            'lm_head.weight': ([i - 7.0 for i in range(15)], (5, 3))}
    ranks = [collections.OrderedDict(), collections.OrderedDict()]
    flat, flat_items = [], []
    for name, (vals, shape) in full.items():
        row = shape[1] if len(shape) > 1 else 1
        rows0 = (shape[0] + 1) // 2
        v0, v1 = vals[:rows0 * row], vals[rows0 * row:]
        s0 = (rows0,) + shape[1:]
        st = Storage('FloatStorage', name, 'f', v0)
        ranks[0][name] = T(st, 0, s0, (row, 1)[-len(shape):])
        flat_items.append((name, len(flat), (shape[0] - rows0,) + shape[1:], row, len(shape)))
        flat += v1
    fs = Storage('FloatStorage', 'flat', 'f', flat)
    for name, off, s1, row, nd in flat_items:
        ranks[1][name] = T(fs, off, s1, (row, 1)[-nd:])
    for r in range(2):
        ranks[r]._metadata = collections.OrderedDict([('', {'version': 1})])
        save(actor + '/model_world_size_2_rank_%d.pt' % r, ranks[r])
    with open(actor + '/fsdp_config.json', 'w') as f:
        json.dump({'FSDP_version': 1, 'world_size': 2}, f)
    with open(actor + '/huggingface/config.json', 'w') as f:
        json.dump({'architectures': ['LlamaForCausalLM']}, f)

{'table': table, 'ckpt': ckpt}[sys.argv[2]](sys.argv[1])
print('ok')
