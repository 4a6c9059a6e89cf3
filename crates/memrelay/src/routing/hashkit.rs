//! twemproxy's key hash functions (`src/hashkit/nc_*.c` of nutcracker 0.5.0), ported so that each
//! returns exactly the `uint32_t` nutcracker computes for the same bytes, quirks included:
//!
//! - **C `char`.** Most of them read the key through `const char *` and widen each byte with
//!   `(uint32_t)key[x]`, which sign-extends bytes ≥ 0x80 where `char` is signed (x86-64). They
//!   do the same here through [`core::ffi::c_char`] ([`widen`]), so a key with such bytes hashes
//!   as a nutcracker built for the same target hashes it. Where the C code reads bytes as
//!   unsigned (`md5`, `crc32a`, `murmur`, `jenkins`, most of `hsieh`), so does the port.
//! - **32 bits.** `fnv1_64` and `fnv1a_64` use FNV's 64-bit constants but return the low 32 bits
//!   (`fnv1a_64` even computes in 32 bits); `crc16` returns its whole 32-bit register, never cut
//!   to 16 bits; `crc32` is libmemcached's, bits 16..31 of the CRC-32 with the top one cleared,
//!   where `crc32a` is the CRC-32 itself.
//!
//! The functions are total: any bytes, any length, no panic. Which one a pool uses is a setting
//! ([`crate::settings::KeyHash`]).

use core::ffi::c_char;

use md5::{Digest, Md5};

/// `(uint32_t)key[x]` for `const char *key`: sign-extends where C `char` is signed.
#[inline]
fn widen(byte: u8) -> u32 {
    #[allow(clippy::unnecessary_cast)] // c_char is i8 or u8 depending on the target
    let value = (byte as c_char) as i32 as u32;
    value
}

/// The MD5 digest of `data` as four little-endian words; word `a` is twemproxy's
/// `ketama_hash(data, len, a)`, word 0 is `hash_md5(data, len)`.
#[inline]
pub(crate) fn md5_words(data: &[u8]) -> [u32; 4] {
    let d = Md5::digest(data);
    let w = |i: usize| u32::from_le_bytes([d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]]);
    [w(0), w(1), w(2), w(3)]
}

/// `hash_md5`: the first four digest bytes, little-endian.
#[inline]
pub fn md5(key: &[u8]) -> u32 {
    md5_words(key)[0]
}

/// `hash_one_at_a_time` (Bob Jenkins' one-at-a-time hash).
pub fn one_at_a_time(key: &[u8]) -> u32 {
    let mut value: u32 = 0;
    for &b in key {
        value = value.wrapping_add(widen(b));
        value = value.wrapping_add(value << 10);
        value ^= value >> 6;
    }
    value = value.wrapping_add(value << 3);
    value ^= value >> 11;
    value.wrapping_add(value << 15)
}

/// `crc16tab`: the CRC-16 table of polynomial 0x1021 (most significant bit first).
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// `hash_crc16`: CRC-16/XMODEM in its low 16 bits, but the register is a `uint32_t` that is
/// shifted left and never masked, so the bytes shifted past bit 15 stay in the result (the
/// table index only looks at bits 8..15).
pub fn crc16(key: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in key {
        // `((crc >> 8) ^ *key++) & 0x00ff`: the mask drops any sign extension of the byte.
        let index = ((crc >> 8) ^ u32::from(b)) & 0xff;
        crc = (crc << 8) ^ u32::from(CRC16_TABLE[index as usize]);
    }
    crc
}

/// `hash_crc32` (libmemcached's): `((~crc) >> 16) & 0x7fff` of the CRC-32, a 15-bit value.
pub fn crc32(key: &[u8]) -> u32 {
    (crc32fast::hash(key) >> 16) & 0x7fff
}

/// `hash_crc32a`: the CRC-32 (ISO-HDLC, as zlib's `crc32`).
pub fn crc32a(key: &[u8]) -> u32 {
    crc32fast::hash(key)
}

const FNV_64_INIT: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_64_PRIME: u64 = 0x0000_0100_0000_01b3;
const FNV_32_INIT: u32 = 2_166_136_261;
const FNV_32_PRIME: u32 = 16_777_619;

/// `hash_fnv1_64`: FNV-1 in 64 bits, its low 32 bits returned. The low 32 bits of a 64-bit
/// product or xor depend only on the low 32 bits of the operands, so 32-bit arithmetic gives the
/// same result; the byte is `(uint64_t)key[x]`, sign-extended like [`widen`].
pub fn fnv1_64(key: &[u8]) -> u32 {
    let mut hash = FNV_64_INIT as u32;
    for &b in key {
        hash = hash.wrapping_mul(FNV_64_PRIME as u32);
        hash ^= widen(b);
    }
    hash
}

/// `hash_fnv1a_64`: FNV-1a with the 64-bit offset basis and prime truncated to 32 bits.
pub fn fnv1a_64(key: &[u8]) -> u32 {
    let mut hash = FNV_64_INIT as u32;
    for &b in key {
        hash ^= widen(b);
        hash = hash.wrapping_mul(FNV_64_PRIME as u32);
    }
    hash
}

/// `hash_fnv1_32`: FNV-1 in 32 bits.
pub fn fnv1_32(key: &[u8]) -> u32 {
    let mut hash = FNV_32_INIT;
    for &b in key {
        hash = hash.wrapping_mul(FNV_32_PRIME);
        hash ^= widen(b);
    }
    hash
}

/// `hash_fnv1a_32`: FNV-1a in 32 bits.
pub fn fnv1a_32(key: &[u8]) -> u32 {
    let mut hash = FNV_32_INIT;
    for &b in key {
        hash ^= widen(b);
        hash = hash.wrapping_mul(FNV_32_PRIME);
    }
    hash
}

/// `hash_hsieh` (Paul Hsieh's SuperFastHash). `get16bits` reads two unsigned bytes
/// little-endian (nutcracker's portable macro; the unaligned-load one is for i386 only, and
/// gives the same value); the third byte of a 3-byte tail is read as C `char`.
pub fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let get16 = |d: &[u8]| u32::from(d[0]) | (u32::from(d[1]) << 8);
    let mut hash: u32 = 0;
    let mut chunks = key.chunks_exact(4);
    for chunk in &mut chunks {
        hash = hash.wrapping_add(get16(chunk));
        let tmp = (get16(&chunk[2..]) << 11) ^ hash;
        hash = (hash << 16) ^ tmp;
        hash = hash.wrapping_add(hash >> 11);
    }
    match *chunks.remainder() {
        [a, b, c] => {
            hash = hash.wrapping_add(get16(&[a, b]));
            hash ^= hash << 16;
            hash ^= widen(c) << 18;
            hash = hash.wrapping_add(hash >> 11);
        }
        [a, b] => {
            hash = hash.wrapping_add(get16(&[a, b]));
            hash ^= hash << 11;
            hash = hash.wrapping_add(hash >> 17);
        }
        [a] => {
            hash = hash.wrapping_add(u32::from(a));
            hash ^= hash << 10;
            hash = hash.wrapping_add(hash >> 1);
        }
        _ => {}
    }
    hash ^= hash << 3;
    hash = hash.wrapping_add(hash >> 5);
    hash ^= hash << 4;
    hash = hash.wrapping_add(hash >> 17);
    hash ^= hash << 25;
    hash.wrapping_add(hash >> 6)
}

/// `hash_murmur`: MurmurHash2 (32-bit) with the seed `0xdeadbeef * length` (nutcracker's
/// choice, not a constant), reading 4-byte blocks little-endian as x86 does.
pub fn murmur(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = key.len() as u32; // `(uint32_t)length`
    let seed = 0xdead_beef_u32.wrapping_mul(length);
    let mut h = seed ^ length;
    let mut blocks = key.chunks_exact(4);
    for block in &mut blocks {
        let mut k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        // `case 3: ... case 2: ... case 1:` falling through.
        if tail.len() == 3 {
            h ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            h ^= u32::from(tail[1]) << 8;
        }
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// `hash_jenkins`: Bob Jenkins' lookup3 `hashlittle` with initial value 13.
pub fn jenkins(key: &[u8]) -> u32 {
    lookup3(key, 13)
}

/// lookup3's `hashlittle(key, length, initval)`, byte by byte (its aligned word reads, which
/// nutcracker takes where it can, give the same value on a little-endian machine).
fn lookup3(key: &[u8], initval: u32) -> u32 {
    let init = 0xdead_beef_u32.wrapping_add(key.len() as u32).wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    if key.is_empty() {
        return c;
    }
    let word = |bytes: &[u8]| {
        let mut w = [0u8; 4];
        w[..bytes.len()].copy_from_slice(bytes);
        u32::from_le_bytes(w)
    };
    // Every 12-byte block but the last is mixed; the last (1..=12 bytes) goes to `final`.
    let mut rest = key;
    while rest.len() > 12 {
        a = a.wrapping_add(word(&rest[0..4]));
        b = b.wrapping_add(word(&rest[4..8]));
        c = c.wrapping_add(word(&rest[8..12]));
        mix(&mut a, &mut b, &mut c);
        rest = &rest[12..];
    }
    a = a.wrapping_add(word(&rest[..rest.len().min(4)]));
    if rest.len() > 4 {
        b = b.wrapping_add(word(&rest[4..rest.len().min(8)]));
    }
    if rest.len() > 8 {
        c = c.wrapping_add(word(&rest[8..]));
    }
    final_mix(&mut a, &mut b, &mut c);
    c
}

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c) ^ c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c) ^ c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a) ^ a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b) ^ b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(14));
    *a = (*a ^ *c).wrapping_sub(c.rotate_left(11));
    *b = (*b ^ *a).wrapping_sub(a.rotate_left(25));
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(16));
    *a = (*a ^ *c).wrapping_sub(c.rotate_left(4));
    *b = (*b ^ *a).wrapping_sub(a.rotate_left(14));
    *c = (*c ^ *b).wrapping_sub(b.rotate_left(24));
}

#[cfg(test)]
mod tests {
    use super::*;

    type HashFn = fn(&[u8]) -> u32;

    /// In nutcracker's order (`HASH_CODEC`).
    const FUNCTIONS: [(&str, HashFn); 12] = [
        ("one_at_a_time", one_at_a_time),
        ("md5", md5),
        ("crc16", crc16),
        ("crc32", crc32),
        ("crc32a", crc32a),
        ("fnv1_64", fnv1_64),
        ("fnv1a_64", fnv1a_64),
        ("fnv1_32", fnv1_32),
        ("fnv1a_32", fnv1a_32),
        ("hsieh", hsieh),
        ("murmur", murmur),
        ("jenkins", jenkins),
    ];

    // Published check values of the algorithms the functions are built on.
    #[test]
    fn published_test_vectors() {
        // CRC catalogue: CRC-32 (ISO-HDLC) and CRC-16/XMODEM of "123456789".
        assert_eq!(crc32a(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b"123456789"), 0xcbf4 & 0x7fff);
        assert_eq!(crc16(b"123456789") & 0xffff, 0x31c3);
        // FNV (Noll's test vectors): 32-bit, and the low half of 64-bit FNV-1 / FNV-1a.
        assert_eq!(fnv1_32(b""), 0x811c_9dc5);
        assert_eq!(fnv1_32(b"a"), 0x050c_5d7e);
        assert_eq!(fnv1a_32(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a_32(b"foobar"), 0xbf9c_f968);
        assert_eq!(fnv1_32(b"foobar"), 0x31f0_b262);
        assert_eq!(fnv1_64(b"a"), 0x8601_b7be); // fnv1_64("a") = 0xaf63bd4c8601b7be
        assert_eq!(fnv1_64(b"foobar"), 0xa4dd_a9c2); // 0x340d8765a4dda9c2
        assert_eq!(fnv1a_64(b"a"), 0x8601_ec8c); // fnv1a_64("a") = 0xaf63dc4c8601ec8c
        assert_eq!(fnv1a_64(b"foobar"), 0xf739_67e8); // 0x85944171f73967e8

        // One-at-a-time (Wikipedia's examples).
        assert_eq!(one_at_a_time(b"a"), 0xca2e_9442);
        assert_eq!(one_at_a_time(b"The quick brown fox jumps over the lazy dog"), 0x519e_91f5);
        // lookup3.c's own driver5: hashlittle over "" and the "Four score" sentence.
        assert_eq!(lookup3(b"", 0), 0xdead_beef);
        assert_eq!(lookup3(b"", 0xdead_beef), 0xbd5b_7dde);
        assert_eq!(lookup3(b"Four score and seven years ago", 0), 0x1777_0551);
        assert_eq!(lookup3(b"Four score and seven years ago", 1), 0xcd62_8161);
        // RFC 1321: MD5("abc") = 900150983cd24fb0..., first four bytes little-endian.
        assert_eq!(md5(b"abc"), 0x9850_0190);
        // crc16tab as nutcracker spells it (first, second, last entries).
        assert_eq!([CRC16_TABLE[0], CRC16_TABLE[1], CRC16_TABLE[255]], [0x0000, 0x1021, 0x1ef0]);
    }

    // Values printed by nutcracker 0.5.0's own src/hashkit/nc_*.c compiled with gcc on x86-64
    // (signed `char`), each key hashed at four alignments (jenkins reads by alignment) with the
    // same result. Columns in `FUNCTIONS` order.
    #[rustfmt::skip]
    const NUTCRACKER: [(&[u8], [u32; 12]); 13] = [
        (b"\x00", [0, 2_911_221_907, 0, 20_994, 3_523_407_757, 2_248_259_551, 2_248_259_551, 84_696_351, 84_696_351, 0, 2_758_644_358, 2_231_611_923]),
        (b"a", [3_392_050_242, 3_111_502_092, 31_879, 26_807, 3_904_355_907, 2_248_259_518, 2_248_273_036, 84_696_446, 3_826_002_220, 2_472_816_263, 1_262_581_116, 3_768_813_200]),
        (b"ab", [1_172_708_952, 1_140_096_536, 8_156_415, 7_811, 2_659_403_885, 3_035_314_104, 3_041_237_098, 1_886_858_552, 1_294_271_946, 1_535_905_475, 3_820_310_011, 3_249_891_675]),
        (b"abc", [3_977_453_403, 2_555_380_112, 2_088_017_366, 13_604, 891_568_578, 1_806_675_403, 88_168_267, 1_134_309_195, 440_920_331, 3_843_582_778, 2_064_434_216, 2_403_423_744]),
        (b"abcd", [3_448_463_878, 1_282_538_722, 1_956_489_270, 28_034, 3_984_772_369, 4_219_752_341, 3_993_445_597, 3_118_363_509, 3_459_545_533, 984_896_216, 4_016_735_919, 3_574_732_058]),
        (b"hello world!", [2_614_696_403, 2_398_699_516, 104_552_315, 948, 62_177_901, 3_111_880_380, 3_445_237_362, 2_315_368_860, 2_956_263_410, 326_258_531, 2_139_946_157, 465_987_074]),
        (b"123456789", [3_328_923_845, 2_498_230_565, 2_257_596_867, 19_444, 3_421_780_262, 737_744_598, 600_231_420, 605_325_334, 3_146_166_556, 3_841_726_064, 3_077_965_456, 427_260_662]),
        (b"key:\xe9t\xe9", [1_673_662_109, 2_525_933_592, 3_498_148_782, 4_870, 319_213_298, 1_943_437_824, 1_756_336_354, 3_982_758_432, 3_709_071_714, 1_944_017_593, 2_107_828_753, 89_462_635]),
        (b"\xff", [2_925_896_852, 3_561_969_920, 7_920, 32_512, 4_278_190_080, 2_046_707_744, 2_046_707_310, 4_210_270_944, 4_193_493_326, 44_489_640, 3_679_652_508, 3_784_723_880]),
        (b"\x80\xff\x7f abc", [361_174_787, 1_667_655_498, 3_890_884_001, 24_683, 3_765_165_744, 3_992_875_829, 1_183_428_441, 554_345_813, 2_740_812_409, 2_710_118_498, 2_059_426_384, 2_705_275_464]),
        (b"user:1234:prof", [38_985_660, 3_875_301_258, 1_877_872_768, 14_474, 3_096_060_699, 2_247_005_257, 4_115_383_797, 253_915_657, 800_204_021, 3_318_646_962, 3_464_252_618, 2_934_814_895]),
        (b"\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9\xe9", [3_866_328_044, 3_423_307_999, 3_621_149_372, 14_168, 3_076_047_869, 3_372_985_730, 2_906_289_112, 553_156_610, 3_209_206_840, 3_408_424_425, 492_877_888, 1_990_040_873]),
        (b"session_0123456789abcdef\xfe", [1_865_413_067, 835_060_424, 400_958_777, 29_843, 4_103_293_814, 1_195_311_820, 3_805_162_086, 321_215_276, 3_210_291_302, 3_680_931_831, 2_639_110_629, 307_790_913]),
    ];

    #[test]
    fn every_function_computes_what_nutcracker_computes() {
        // The values were computed where `char` is signed; where it is not, keys with bytes
        // >= 0x80 hash differently in nutcracker too, so only the others are compared.
        let signed_char = c_char::MIN != 0;
        for (key, expected) in NUTCRACKER {
            if !signed_char && key.iter().any(|&b| b >= 0x80) {
                continue;
            }
            for ((name, function), value) in FUNCTIONS.iter().zip(expected) {
                assert_eq!(function(key), value, "{name}({:?})", String::from_utf8_lossy(key));
            }
        }
    }

    #[test]
    fn empty_and_long_keys_do_not_panic() {
        let long = vec![0xa5u8; 100_000];
        for (name, function) in FUNCTIONS {
            let _ = function(b"");
            let _ = function(&long);
            assert_eq!(function(b"same"), function(b"same"), "{name}");
        }
        assert_eq!(hsieh(b""), 0); // `if (key_length <= 0) return 0`
    }
}
