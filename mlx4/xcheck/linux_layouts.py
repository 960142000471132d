#!/usr/bin/env python3
"""Offsets of the ConnectX-3 layouts as Linux's mlx4 sources declare them.

Reads the C structs and the *_OFFSET #defines that rpmd's own #[repr(C)]
layouts (mlx4/src/prm/) transcribe, from a Linux (or Mellanox OFED)
source tree, lays the structs out as a C compiler would (natural
alignment, `__packed` honoured, anonymous unions and structs flattened),
and prints one line per field:

    <struct> <field> <offset>

and per define `#define <NAME> <offset>`. The output, committed as
mlx4/tests/linux-offsets.txt with the tree's name in its header, is what
mlx4/tests/linux_layouts.rs checks rpmd's layouts against.

    python3 mlx4/xcheck/linux_layouts.py TREE [--source NAME] > mlx4/tests/linux-offsets.txt
"""
import re
import sys

FILES = [
    "include/linux/mlx4/qp.h",
    "include/linux/mlx4/cq.h",
    "include/linux/mlx4/device.h",
    "drivers/net/ethernet/mellanox/mlx4/mlx4.h",
    "drivers/net/ethernet/mellanox/mlx4/fw.c",
]
STRUCTS = [
    "mlx4_qp_path", "mlx4_rss_context", "mlx4_qp_context", "union mlx4_wqe_qpn_vlan", "mlx4_wqe_ctrl_seg",
    "mlx4_wqe_data_seg",
    "mlx4_cqe", "mlx4_eqe", "mlx4_mpt_entry", "mlx4_eq_context", "mlx4_cq_context",
    "mlx4_mgm", "mlx4_set_port_general_context",
]
DEFINES = re.compile(r"^\s*#define\s+((?:INIT_HCA|QUERY_DEV_CAP|QUERY_FW|QUERY_PORT)_\w+_OFFSET)\s+([^\n]+)$", re.M)
SIZES = {
    "u8": 1, "__u8": 1, "char": 1, "u16": 2, "__u16": 2, "__be16": 2, "__le16": 2,
    "u32": 4, "__u32": 4, "__be32": 4, "__le32": 4, "int": 4, "u64": 8, "__u64": 8,
    "__be64": 8, "__le64": 8,
}


def strip(src):
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    src = re.sub(r"\\\n", " ", src)
    src = re.sub(r"^\s*#[^\n]*", " ", src, flags=re.M)
    return re.sub(r"//[^\n]*", " ", src)


def macros(src):
    m = {"ETH_ALEN": "6"}
    for name, val in re.findall(r"^\s*#define\s+(\w+)\s+([^\n]+)$", src, re.M):
        m.setdefault(name, val.strip())
    for name, val in re.findall(r"(\w+)\s*=\s*([^,\n}]+)[,\n}]", src):
        m.setdefault(name, val.strip())
    return m


def evaluate(expr, mac):
    for _ in range(8):
        expr = re.sub(r"sizeof\s*\(\s*(\w+)\s*\)", lambda k: str(SIZES[k.group(1)]), expr)
        expr = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda k: "(%s)" % mac.get(k.group(0), k.group(0)), expr)
    return int(eval(expr, {"__builtins__": {}}))


def tokens(body):
    return re.findall(r"[A-Za-z_]\w*|\[[^\]]*\]|[{};]", body)


def layout(toks, i, mac, structs, is_union, packed):
    """Lays out the members from toks[i] to the '}' that closes their body
    (natural alignment, none when `packed`); returns
    ([(name, offset)], size, alignment, the index after the '}')."""
    fields, off, align, size = [], 0, 1, 0

    def place(fsize, falign):
        nonlocal off, size, align
        falign = 1 if packed else falign
        base = 0 if is_union else -(-off // falign) * falign
        align = max(align, falign)
        if is_union:
            size = max(size, fsize)
        else:
            off = base + fsize
        return base

    while toks[i] != "}":
        if toks[i] in ("struct", "union") and toks[i + 1] == "{":
            inner_union = toks[i] == "union"
            # An inner body is packed if its closing brace says so.
            depth, j = 0, i + 1
            while True:
                depth += {"{": 1, "}": -1}.get(toks[j], 0)
                if depth == 0:
                    break
                j += 1
            inner_packed = packed or toks[j + 1] == "__packed"
            sub, ssize, salign, i = layout(toks, i + 2, mac, structs, inner_union, inner_packed)
            while toks[i] == "__packed":
                i += 1
            name = None
            if toks[i] != ";":
                name, i = toks[i], i + 1
            i += 1
            base = place(ssize, salign)
            if name:
                fields.append((name, base))
            fields += [((name + "." + n) if name else n, base + o) for n, o in sub]
            continue
        if toks[i] in ("struct", "union"):
            i += 1
        ty, name, i = toks[i], toks[i + 1], i + 2
        count = 1
        while toks[i].startswith("["):
            count *= evaluate(toks[i][1:-1], mac)
            i += 1
        while toks[i] != ";":
            i += 1
        i += 1
        if ty in SIZES:
            sub, fsize, falign = [], SIZES[ty], SIZES[ty]
        else:
            sub, fsize, falign = structs[ty]
        base = place(fsize * count, falign)
        fields.append((name, base))
        fields += [(name + "." + n, base + o) for n, o in sub]
    end = size if is_union else off
    return fields, -(-end // align) * align, align, i + 1


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    tree = sys.argv[1]
    source = sys.argv[sys.argv.index("--source") + 1] if "--source" in sys.argv else tree
    src = ""
    for f in FILES:
        with open(f"{tree}/{f}") as fh:
            src += fh.read() + "\n"
    mac = macros(src)
    code = strip(src)
    structs = {}
    print("# Offsets of rpmd's mlx4 layouts as Linux's sources declare them:")
    print(f"# {source}, files: {' '.join(FILES)}")
    print("# made by mlx4/xcheck/linux_layouts.py; checked by mlx4/tests/linux_layouts.rs")
    for entry in STRUCTS:
        kind, name = entry.split() if " " in entry else ("struct", entry)
        m = re.search(r"\b%s\s+%s\s*\{" % (kind, name), code)
        if not m:
            sys.exit(f"struct {name} not found")
        toks = tokens(code[m.end():])
        depth, end = 1, 0
        while depth:
            depth += {"{": 1, "}": -1}.get(toks[end], 0)
            end += 1
        packed = toks[end] == "__packed"
        fields, size, align, _ = layout(toks, 0, mac, structs, kind == "union", packed)
        structs[name] = (fields, size, align)
        print(f"{name} sizeof {size}")
        for f, o in fields:
            print(f"{name} {f} {o}")
    for name, val in DEFINES.findall(src):
        print(f"#define {name} {evaluate(val, mac)}")
    # Enum constants rpmd transcribes.
    for name in ["MLX4_RSS_OFFSET_IN_QPC_PRI_PATH"]:
        print(f"#define {name} {evaluate(mac[name], mac)}")


if __name__ == "__main__":
    main()
