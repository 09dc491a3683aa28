/* A dataset's object header read from the mapped file: see fmt_h5ohdr.h.
 * Only version 2 headers ("OHDR", with their "OCHK" continuation blocks,
 * each under a lookup3 checksum), as libhdf5 writes them with the latest
 * format bounds, which msprobe's writer asks for; the layout of each field
 * is HDF5's file format specification (version 3), section IV.A.1.b and
 * IV.A.2. */
#include "fmt_h5ohdr.h"

#include <string.h>

#define OH_ROT(x, k) (((x) << (k)) | ((x) >> (32 - (k))))

uint32_t msp_lookup3(const uint8_t *k, size_t n)
{
    uint32_t a, b, c;
    a = b = c = 0xdeadbeefu + (uint32_t)n;
    for (; n > 12; n -= 12, k += 12) {
        a += msp_h5_rd32(k);
        b += msp_h5_rd32(k + 4);
        c += msp_h5_rd32(k + 8);
        a -= c, a ^= OH_ROT(c, 4), c += b;
        b -= a, b ^= OH_ROT(a, 6), a += c;
        c -= b, c ^= OH_ROT(b, 8), b += a;
        a -= c, a ^= OH_ROT(c, 16), c += b;
        b -= a, b ^= OH_ROT(a, 19), a += c;
        c -= b, c ^= OH_ROT(b, 4), b += a;
    }
    if (n == 0)
        return c;
    uint8_t last[12] = {0}; /* the tail, zero-padded: what lookup3's switch adds */
    memcpy(last, k, n);
    a += msp_h5_rd32(last);
    b += msp_h5_rd32(last + 4);
    c += msp_h5_rd32(last + 8);
    c ^= b, c -= OH_ROT(b, 14);
    a ^= c, a -= OH_ROT(c, 11);
    b ^= a, b -= OH_ROT(a, 25);
    c ^= b, c -= OH_ROT(b, 16);
    a ^= c, a -= OH_ROT(c, 4);
    b ^= a, b -= OH_ROT(a, 14);
    c ^= b, c -= OH_ROT(b, 24);
    return c;
}

void msp_ohdr_init(struct msp_ohdr *o, const void *map, size_t len)
{
    static const uint8_t sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    memset(o, 0, sizeof *o);
    o->map = map;
    o->len = len;
    const uint8_t *m = map;
    /* superblock 2 or 3 at offset 0 (no user block): 8-byte addresses and
     * lengths, base address 0, so an address is an offset in the map */
    o->on = m && len >= 48 && memcmp(m, sig, sizeof sig) == 0 && (m[8] == 2 || m[8] == 3) &&
            m[9] == 8 && m[10] == 8 && msp_h5_rd64(m + 12) == 0;
}

/* The messages of one header that matter here. */
struct oh_msgs {
    const uint8_t *dtype, *fill, *space, *layout;
    uint16_t dtype_len, fill_len, space_len, layout_len;
    uint8_t dtype_flags, fill_flags, fill_type, layout_flags;
    int n_dtype, n_fill, n_space, n_layout;
    uint64_t cont[4][2]; /* continuation blocks: address, length */
    int n_cont;
    struct msp_ohdr_group *group; /* NULL: a dataset's header; else a group's links */
    int linfo;                    /* a group's link info message, its links compact */
};

/* A link message into l: 0 when it cannot be read. */
static int oh_link(const uint8_t *d, size_t size, struct msp_ohdr_link *l)
{
    if (size < 2 || d[0] != 1 || (d[1] & 0xE0))
        return 0;
    uint8_t fl = d[1];
    size_t at = 2;
    l->hard = 1;
    if (fl & 0x08) {
        if (size < 3)
            return 0;
        l->hard = d[at++] == 0; /* 0 hard, 1 soft, 64 external */
    }
    at += ((fl & 0x04) ? 8 : 0) + ((fl & 0x10) ? 1 : 0);
    size_t w = (size_t)1 << (fl & 3);
    if (at > size || size - at < w)
        return 0;
    uint64_t len = msp_h5_rdn(d + at, (int)w);
    at += w;
    if (len == 0 || len > size - at)
        return 0;
    l->name = (const char *)d + at;
    l->len = (size_t)len;
    at += (size_t)len;
    l->addr = UINT64_MAX;
    if (l->hard) {
        if (size - at < 8)
            return 0;
        l->addr = msp_h5_rd64(d + at);
    }
    return 1;
}

/* A group's message of type `type`: 0 when it is not one of a group of
 * compact links. */
static int oh_group_msg(struct oh_msgs *m, uint8_t type, const uint8_t *d, size_t size)
{
    struct msp_ohdr_group *g = m->group;
    if (type == 0x0A) /* group info: sizes and estimates, nothing to check */
        return 1;
    if (type == 0x02) { /* link info: links compact when no fractal heap */
        if (size < 2)
            return 0;
        size_t at = 2 + ((d[1] & 1) ? 8 : 0);
        if (size < at + 16 || d[0] != 0 || m->linfo++)
            return 0;
        return msp_h5_rd64(d + at) == UINT64_MAX;
    }
    if (type == 0x06)
        return g->n < MSP_OHDR_LINKS && oh_link(d, size, &g->l[g->n++]);
    return 0;
}

/* The messages of one chunk, [p, end): 0 at one that is not listed or
 * does not fit. */
static int oh_chunk(const uint8_t *p, const uint8_t *end, int crt, struct oh_msgs *m)
{
    size_t head = crt ? 6 : 4;
    while ((size_t)(end - p) >= head) {
        uint8_t type = p[0], flags = p[3];
        size_t size = (size_t)msp_h5_rd16(p + 1);
        p += head;
        if (size > (size_t)(end - p))
            return 0;
        const uint8_t *d = p;
        p += size;
        /* a dataset's messages: none in a group's header */
        if (m->group &&
            (type == 0x01 || type == 0x03 || type == 0x04 || type == 0x05 || type == 0x08))
            return 0;
        switch (type) {
        case 0x00: /* NIL */
        case 0x0C: /* attribute */
        case 0x0D: /* object comment */
        case 0x0E: /* modification time (old) */
        case 0x12: /* modification time */
        case 0x15: /* attribute info */
            break;
        case 0x02: /* link info */
        case 0x06: /* link */
        case 0x0A: /* group info */
            if (!m->group || !oh_group_msg(m, type, d, size))
                return 0;
            break;
        case 0x01:
            m->space = d, m->space_len = (uint16_t)size, m->n_space++;
            if (flags)
                return 0; /* shared or otherwise special: libhdf5's to read */
            break;
        case 0x03:
            m->dtype = d, m->dtype_len = (uint16_t)size, m->dtype_flags = flags, m->n_dtype++;
            break;
        case 0x04:
        case 0x05:
            m->fill = d, m->fill_len = (uint16_t)size, m->fill_flags = flags;
            m->fill_type = type, m->n_fill++;
            break;
        case 0x08:
            m->layout = d, m->layout_len = (uint16_t)size, m->layout_flags = flags, m->n_layout++;
            break;
        case 0x10:
            if (size != 16 || m->n_cont == 4)
                return 0;
            m->cont[m->n_cont][0] = msp_h5_rd64(d);
            m->cont[m->n_cont][1] = msp_h5_rd64(d + 8);
            m->n_cont++;
            break;
        default:
            return 0;
        }
    }
    return 1;
}

/* The header at addr, read and its checksums checked: 0 when it is not a
 * version 2 header of listed messages with one datatype, dataspace and
 * layout each, and at most one fill value. */
static int oh_read(const struct msp_ohdr *o, uint64_t addr, struct oh_msgs *m,
                   struct msp_ohdr_group *group)
{
    memset(m, 0, sizeof *m);
    m->group = group;
    if (group)
        group->n = 0;
    if (!o->on || addr >= o->len || o->len - addr < 16)
        return 0;
    const uint8_t *p = o->map + addr;
    size_t room = o->len - (size_t)addr;
    if (memcmp(p, "OHDR", 4) != 0 || p[4] != 2 || (p[5] & 0xC0))
        return 0;
    uint8_t fl = p[5];
    size_t at = 6 + ((fl & 0x20) ? 16 : 0) + ((fl & 0x10) ? 4 : 0);
    int w = 1 << (fl & 3);
    if (room < at + (size_t)w)
        return 0;
    uint64_t size0 = msp_h5_rdn(p + at, w);
    at += (size_t)w;
    if (size0 > room - at || room - at - size0 < 4)
        return 0;
    const uint8_t *end = p + at + size0;
    if (msp_lookup3(p, at + (size_t)size0) != msp_h5_rd32(end))
        return 0;
    int crt = (fl & 0x04) != 0;
    if (!oh_chunk(p + at, end, crt, m))
        return 0;
    for (int i = 0; i < m->n_cont; i++) { /* n_cont grows as blocks name more */
        uint64_t ca = m->cont[i][0], cl = m->cont[i][1];
        if (ca >= o->len || cl < 8 || cl > o->len - ca)
            return 0;
        const uint8_t *c = o->map + ca;
        if (memcmp(c, "OCHK", 4) != 0 ||
            msp_lookup3(c, (size_t)cl - 4) != msp_h5_rd32(c + cl - 4) ||
            !oh_chunk(c + 4, c + cl - 4, crt, m))
            return 0;
    }
    if (group)
        return m->linfo == 1;
    return m->n_dtype == 1 && m->n_space == 1 && m->n_layout == 1 && m->n_fill <= 1;
}

int msp_ohdr_group(const struct msp_ohdr *o, uint64_t addr, struct msp_ohdr_group *g)
{
    struct oh_msgs m;
    if (oh_read(o, addr, &m, g))
        return 1;
    g->n = 0;
    return 0;
}

int msp_ohdr_group_find(const struct msp_ohdr_group *g, const char *name, uint64_t *addr)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < g->n; i++)
        if (g->l[i].len == n && !memcmp(g->l[i].name, name, n)) {
            *addr = g->l[i].hard ? g->l[i].addr : UINT64_MAX;
            return 1;
        }
    return 0;
}

/* The dataspace's version, flags and type (version 1 has no type: simple,
 * or scalar without dimensions), and its dimensions: 0 when it cannot be
 * read. */
static int oh_space(const struct oh_msgs *m, uint8_t head[3], uint64_t *dims, int *nd)
{
    const uint8_t *d = m->space;
    if (m->space_len < 4 || (d[0] != 1 && d[0] != 2) || (d[2] & ~1u))
        return 0;
    size_t at = d[0] == 2 ? 4 : 8;
    head[0] = d[0];
    head[1] = d[2];
    head[2] = d[0] == 2 ? d[3] : (uint8_t)(d[1] ? 1 : 0);
    *nd = d[1];
    if (*nd > MSP_MAX_NDIM || m->space_len < at + (size_t)*nd * 8 * (1 + (d[2] & 1)))
        return 0;
    for (int k = 0; k < *nd; k++)
        dims[k] = msp_h5_rd64(d + at + 8 * k);
    return 1;
}

static const struct msp_ohdr_template *oh_template(const struct msp_ohdr *o, int dtype)
{
    for (int i = 0; i < MSP_OHDR_TEMPLATES; i++)
        if (o->tpl[i].dtype == dtype)
            return &o->tpl[i];
    return NULL;
}

int msp_ohdr_accepts(const struct msp_ohdr *o, uint64_t addr, const msp_tensor_info_t *t)
{
    const struct msp_ohdr_template *tp = t->dtype ? oh_template(o, (int)t->dtype) : NULL;
    struct oh_msgs m;
    uint8_t head[3];
    uint64_t dims[MSP_MAX_NDIM];
    int nd;
    if (!tp || !t->has_data || t->offset < 0 || !oh_read(o, addr, &m, NULL) ||
        !oh_space(&m, head, dims, &nd))
        return 0;
    /* the datatype, fill value and layout kind libhdf5 accepted for this
     * dtype, byte for byte */
    if (memcmp(head, tp->space_head, 3) != 0 || m.dtype_len != tp->dtype_len ||
        m.dtype_flags != tp->dtype_flags || memcmp(m.dtype, tp->dtype_msg, m.dtype_len) != 0)
        return 0;
    if (m.n_fill ? (m.fill_type != tp->fill_type || m.fill_len != tp->fill_len ||
                    m.fill_flags != tp->fill_flags || memcmp(m.fill, tp->fill_msg, m.fill_len) != 0)
                 : tp->fill_len != 0)
        return 0;
    if (m.layout_len < 18 || memcmp(m.layout, tp->layout_head, 2) != 0 ||
        m.layout_flags != tp->layout_flags)
        return 0;
    /* the row's shape, and its bytes the dataset's own contiguous storage */
    if (nd != t->ndim)
        return 0;
    uint64_t numel = 1;
    for (int k = 0; k < nd; k++) {
        if ((int64_t)dims[k] != t->shape[k] || (dims[k] && numel > UINT64_MAX / dims[k]))
            return 0;
        numel *= dims[k];
    }
    uint64_t at = msp_h5_rd64(m.layout + 2), size = msp_h5_rd64(m.layout + 10);
    size_t elem = msp_dtype_size(t->dtype);
    return at == (uint64_t)t->offset && size == (uint64_t)t->nbytes && elem &&
           numel <= UINT64_MAX / elem && size == numel * elem && at <= o->len &&
           size <= o->len - at;
}

void msp_ohdr_learn(struct msp_ohdr *o, uint64_t addr, const msp_tensor_info_t *t,
                    uint64_t h5_offset)
{
    struct oh_msgs m;
    uint8_t head[3];
    uint64_t dims[MSP_MAX_NDIM];
    int nd;
    if (!o->on || !t->dtype || !t->has_data || oh_template(o, (int)t->dtype) ||
        !oh_read(o, addr, &m, NULL) || !oh_space(&m, head, dims, &nd) || m.layout_len < 18 ||
        (m.layout[0] != 3 && m.layout[0] != 4) || m.layout[1] != 1 ||
        m.dtype_len > MSP_OHDR_TEMPLATE_BYTES || m.fill_len > MSP_OHDR_TEMPLATE_BYTES)
        return;
    if (msp_h5_rd64(m.layout + 2) != h5_offset) {
        o->on = 0; /* addresses here are not what libhdf5 reads: no shortcut */
        return;
    }
    struct msp_ohdr_template *tp = NULL;
    for (int i = 0; i < MSP_OHDR_TEMPLATES && !tp; i++)
        tp = o->tpl[i].dtype ? NULL : &o->tpl[i];
    if (!tp)
        return;
    tp->dtype = (int)t->dtype;
    memcpy(tp->dtype_msg, m.dtype, m.dtype_len);
    tp->dtype_len = m.dtype_len;
    tp->dtype_flags = m.dtype_flags;
    tp->fill_len = m.n_fill ? m.fill_len : 0;
    if (m.n_fill)
        memcpy(tp->fill_msg, m.fill, m.fill_len);
    tp->fill_flags = m.fill_flags;
    tp->fill_type = m.fill_type;
    memcpy(tp->space_head, head, 3);
    memcpy(tp->layout_head, m.layout, 2);
    tp->layout_flags = m.layout_flags;
}
