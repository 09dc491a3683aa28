"""What fmt_read_dump (fmt_read_dump.c) prints, parsed: its F, R, T, S and
A lines (the layout is in that file's opening comment)."""


def parse(out):
    """(F line's fields, [(record, order)], {record: [tensor dict]},
    {record: {key: value}}); a tensor's producer is None when it has none"""
    head, recs, tensors, attrs = None, [], {}, {}
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == "S":  # the last T line's tensor read through skips
            tensors[f[1]][-1]["skip_crc"] = int(f[3])
        elif f[0] == "F":
            head = f[1:]
        elif f[0] == "R":
            recs.append((f[1], int(f[2])))
        elif f[0] == "T":
            tensors.setdefault(f[1], []).append(dict(
                role=f[2], dtype=f[3], ndim=int(f[4]),
                shape=tuple(int(v) for v in f[5].split(",")) if f[5] else (),
                has_data=int(f[6]), has_stats=int(f[7]), offset=int(f[8]), nbytes=int(f[9]),
                data_crc=None if f[10] == "-" else int(f[10]), max=float(f[11]),
                min=float(f[12]), mean=float(f[13]), norm=float(f[14]), nan_count=int(f[15]),
                inf_count=int(f[16]), crc32=int(f[17]), device=f[18],
                requires_grad=int(f[19]), producer=None if f[20] == "-" else f[20]))
        elif f[0] == "A":
            attrs.setdefault(f[1], {})[f[2]] = f[3]
    return head, recs, tensors, attrs
