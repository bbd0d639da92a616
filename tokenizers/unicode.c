#include "tokenizers/unicode.h"

int zt_uni_lookup(const zt_uni_range *r, int n, uint32_t cp)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].first) hi = mid - 1;
        else if (cp > r[mid].last) lo = mid + 1;
        else return r[mid].value;
    }
    return 0;
}

zt_uni_class zt_uni_class_of(uint32_t cp) { return (zt_uni_class)zt_uni_lookup(zt_uni_classes, zt_uni_classes_n, cp); }

int zt_uni_is_word(uint32_t cp)
{
    switch (zt_uni_class_of(cp)) {
    case ZT_UNI_LETTER:
    case ZT_UNI_DIGIT:
    case ZT_UNI_NUMBER_LETTER:
    case ZT_UNI_MARK:
    case ZT_UNI_CONNECTOR: return 1;
    default: return cp == 0x200C || cp == 0x200D;
    }
}
