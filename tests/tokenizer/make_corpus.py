#!/usr/bin/python3
"""make_corpus.py CORPUS.jsonl

Writes a deterministic, deliberately hard tokenizer corpus: one JSON object a
line, {"name": str, "b64": base64 of the item's raw bytes}.  The bytes are
UTF-8 except in the items that are invalid UTF-8 on purpose.

Determinism: everything random comes from one random.Random with a fixed seed,
and the choice of "assigned" code points comes from this Python's unicodedata,
which must be Unicode 14.0.0 (Python 3.11); the script refuses to run with any
other Unicode version, because then it would write a different corpus (and
could let in characters newer than Unicode 14, which the JavaScript reference,
whose regex engine knows a newer Unicode, would classify differently from a
Unicode 14 implementation).

Every item is checked before it is written: once its bytes are decoded with
replacement of invalid sequences, every code point must be assigned in
Unicode 14 (category not Cn) and not a surrogate.
"""

import base64
import json
import random
import sys
import unicodedata

SEED = 20240517
UNICODE_VERSION = "14.0.0"


def die(msg):
    sys.stderr.write("make_corpus.py: " + msg + "\n")
    sys.exit(1)


if unicodedata.unidata_version != UNICODE_VERSION:
    die("needs a Python whose unicodedata is Unicode %s (Python 3.11), this one has %s"
        % (UNICODE_VERSION, unicodedata.unidata_version))

rng = random.Random(SEED)
items = []  # (name, bytes)
names = set()


def add(name, data):
    if name in names:
        die("duplicate item name " + name)
    names.add(name)
    if isinstance(data, str):
        data = data.encode("utf-8")  # a str with a lone surrogate raises here
    items.append((name, bytes(data)))


def assigned(cp):
    """Assigned in Unicode 14, not a surrogate."""
    cat = unicodedata.category(chr(cp))
    return cat != "Cn" and cat != "Cs"


def assigned_in(ranges, allow_private=False):
    out = []
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            if assigned(cp) and (allow_private or unicodedata.category(chr(cp)) != "Co"):
                out.append(cp)
    if not out:
        die("no assigned code points in %r" % (ranges,))
    return out


def all_assigned_after_decoding(data):
    """True when every code point of data, decoded with replacement, is assigned."""
    return all(assigned(ord(ch)) for ch in set(data.decode("utf-8", errors="replace")))


def random_words(pool, nwords, maxlen, sep=" "):
    words = []
    for _ in range(nwords):
        n = rng.randint(1, maxlen)
        words.append("".join(chr(rng.choice(pool)) for _ in range(n)))
    return sep.join(words)


# ---------------------------------------------------------------------------
# 1. Real text in every major script (hand-written samples).
SCRIPTS = [
    ("latin_diacritics", "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. "
     "Příliš žluťoučký kůň úpěl ďábelské ódy. Ça plaît à l’œuvre : façade, naïve, "
     "Ångström, Łódź, Şişli, Ærøskøbing, Þórshöfn, São Paulo, Dvořák, ĳ, ŉ, ǅ, ǈ."),
    ("latin_vietnamese", "Tiếng Việt có dấu: Mọi người sinh ra đều được tự do và bình đẳng "
     "về nhân phẩm và quyền. Đà Nẵng, Huế, Hồ Chí Minh, Nguyễn Trãi."),
    ("latin_polish_czech_turkish", "Pchnąć w tę łódź jeża lub ośm skrzyń fig. Kŕdeľ ďatľov "
     "učí koňa žrať kôru. Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul ıİiI."),
    ("latin_french_spanish", "Le cœur déçu mais l’âme plutôt naïve, Louÿs rêva de crapaüter en "
     "canoë au delà des îles. ¿Quién es? ¡Olé! El pingüino Wenceslao hizo kilómetros."),
    ("latin_nordic_german", "Høj bjørn på øen. Åsa äter smörgåsbord. Straße, STRASSE, Maße, ẞ, "
     "Größenwahn, Fußgängerübergänge."),
    ("greek", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Τάχιστη αλώπηξ βαφής ψημένη γη, "
     "δρασκελίζει υπέρ νωθρού κυνός. ΆΈΉΊΌΎΏ ΐΰ ς σ Σ ϐ ϑ ϕ ϖ ἀἁἂ ᾼ ῼ"),
    ("greek_polytonic", "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν. ᾅδης ῥήτωρ"),
    ("cyrillic_russian", "Съешь же ещё этих мягких французских булок, да выпей чаю. "
     "ЁЛКА ёлка Широкая электрификация южных губерний даст мощный толчок."),
    ("cyrillic_ukrainian_serbian", "Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів! "
     "Ґ ґ Є є І і Ї ї. Љубазни фењерџија чађавог лица хоће да ми покаже штос. Ђ ђ Ћ ћ Џ џ"),
    ("armenian", "Բարեւ աշխարհ։ Կեցցե՛ Հայաստանը, ու՞ր ես գնում։ Ա Բ Գ ա բ գ և ﬓ ﬔ"),
    ("hebrew", "שלום עולם! דג סקרן שט בים מאוכזב ולפתע מצא חברה. "
     "בְּרֵאשִׁית בָּרָא אֱלֹהִים אֵת הַשָּׁמַיִם וְאֵת הָאָרֶץ. ״ציטוט״ ׳"),
    ("arabic_harakat", "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ. اَلسَّلَامُ عَلَيْكُمْ! "
     "العربية لغة جميلة ٠١٢٣٤٥٦٧٨٩ ؟ ، ؛ ـــ لا ﻻ ﷲ"),
    ("arabic_persian_urdu", "سلام دنیا، زبان فارسی — گچپژ ۰۱۲۳۴۵۶۷۸۹ می‌خواهم. "
     "اردو ایک خوبصورت زبان ہے۔"),
    ("syriac_thaana_nko", "ܫܠܡܐ ܥܠܡܐ ܀ ދިވެހިބަސް ߒߞߏ ߞߊ߲ ߁߂߃"),
    ("devanagari", "नमस्ते दुनिया! हिन्दी भाषा क्षत्रिय ज्ञान श्री ॐ ०१२३४५६७८९ क़ ख़ ग़ "
     "ऋषि कृष्ण द्वार स्त्री।"),
    ("devanagari_sanskrit", "ॐ भूर्भुवः स्वः तत्सवितुर्वरेण्यं भर्गो देवस्य धीमहि धियो यो नः प्रचोदयात्॥"),
    ("bengali", "আমি বাংলায় গান গাই। ক্ষ ঞ্জ ০১২৩৪৫৬৭৮৯ ৳ রবীন্দ্রনাথ ঠাকুর"),
    ("gurmukhi_gujarati_oriya", "ਸਤਿ ਸ੍ਰੀ ਅਕਾਲ ਪੰਜਾਬੀ ગુજરાતી ભાષા સુંદર છે. ଓଡ଼ିଆ ଭାଷା"),
    ("tamil", "யாமறிந்த மொழிகளிலே தமிழ்மொழி போல் இனிதாவது எங்கும் காணோம். "
     "க்ஷ ஸ்ரீ ௧௨௩ ௰"),
    ("telugu_kannada_malayalam", "తెలుగు భాష దేశ భాషలందు లెస్స ಕನ್ನಡ ನಾಡು ನುಡಿ "
     "മലയാളം ഭാഷ ൽ ൾ ൻ ൺ"),
    ("sinhala", "ශ්‍රී ලංකාව සිංහල භාෂාව ආයුබෝවන් ෴"),
    ("thai", "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน "
     "จงฝ่าฟันพัฒนาวิชาการ ๑๒๓ ฿ ฯลฯ"),
    ("lao", "ພາສາລາວ ສະບາຍດີ ໑໒໓ ຂອບໃຈ"),
    ("tibetan", "བོད་ཡིག་ནི་སྐད་ཡིག་ཞིག་ཡིན། ༀ་མ་ཎི་པདྨེ་ཧཱུྃ། ༡༢༣"),
    ("myanmar", "မြန်မာဘာသာ မင်္ဂလာပါ ၁၂၃ ကျေးဇူးတင်ပါတယ်"),
    ("khmer", "ភាសាខ្មែរ សួស្តី ១២៣ អរគុណច្រើន"),
    ("georgian", "ქართული ენა — გამარჯობა მსოფლიო! ᲥᲐᲠᲗᲣᲚᲘ ⴀⴁⴂ Ⴀ Ⴁ"),
    ("hangul", "다람쥐 헌 쳇바퀴에 타고파. 한국어 키보드 ㄱㄴㄷ ㅏㅓ 안녕하세요, 세계!"),
    ("japanese", "いろはにほへと ちりぬるを わかよたれそ つねならむ。カタカナ ｶﾀｶﾅ "
     "漢字かな交じり文、東京都。ヴ ゔ ー 〜 「括弧」『二重』"),
    ("chinese_simplified", "我能吞下玻璃而不伤身体。中华人民共和国成立于1949年，首都是北京。"),
    ("chinese_traditional", "我能吞下玻璃而不傷身體。臺灣、香港與澳門。龍龘齉"),
    ("cjk_supplementary", "𠀀𠀁𠮷野家 𪚥 𩸽 𡈽 𠜎𠜱𠝹𠱓"),
    ("ethiopic", "ሰላም ልዑል። የኢትዮጵያ ቋንቋ ፩፪፫ ሀ ሁ ሂ ሃ ሄ ህ ሆ"),
    ("cherokee", "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ ꭰꭱꭲ Ꮳ ꮳ"),
    ("mongolian", "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ᠌ ᠠ᠋ᠡ᠍ ᠮᠣᠩᠭᠣᠯ ᠤᠯᠤᠰ ᠑᠒᠓"),
    ("canadian_syllabics", "ᐃᓄᒃᑎᑐᑦ ᓀᐦᐃᔭᐍᐏᐣ ᑕᑯᔪᒃ"),
    ("runic_ogham", "ᚠᚢᚦᚨᚱᚲ ᚷᚹᚺᚾ ᚛ᚁᚂᚃᚄᚅ᚜"),
    ("gothic_old_italic", "𐌷𐌰𐌹𐌻𐍃 𐌰𐌹𐍅𐍃 𐌀𐌁𐌂"),
    ("javanese_balinese", "ꦧꦱꦗꦮ ᬩᬲᬩᬮᬶ"),
    ("tifinagh_vai_yi", "ⵜⴰⵎⴰⵣⵉⵖⵜ ꕙꔤ ꆈꌠꁱꂷ"),
    ("ol_chiki_adlam", "ᱚᱞ ᱪᱤᱠᱤ 𞤀𞤣𞤤𞤢𞤥 𞤆𞤵𞤤𞤢𞤪"),
    ("hieroglyphs_cuneiform", "𓀀𓁐𓂀𓃰 𒀀𒀁𒀂"),
    ("braille", "⠓⠑⠇⠇⠕ ⠺⠕⠗⠇⠙"),
    ("math_alphanumeric", "𝐇𝐞𝐥𝐥𝐨 𝕎𝕠𝕣𝕝𝕕 𝒜𝓁𝓅𝒽𝒶 ∀x∈ℝ: x²≥0 ∑∫∂√∞ ≠≤≥ ℵ₀ ⅈ"),
    ("fullwidth", "ＡＢＣ　ａｂｃ　０１２３　！？（）［］｛｝＠＃"),
    ("symbols", "┌─┐│└┘ ░▒▓█ ★☆♠♣♥♦ ©®™ € £ ¥ ₹ ₽ ₿ ° ± × ÷ § ¶ † ‡ • … ‰ ′ ″"),
    ("punctuation_quotes", "“Double” ‘single’ «guillemets» „German“ ‚low‘ 「Japanese」 — – ‐ ‑ ‒ ― ¡¿ ⁇ ⁈"),
    ("ligatures_compat", "ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ Ⅻ ⅻ ㍿ ㎞ ℡ № ℃ ℉ µ Ω Å"),
]
for name, text in SCRIPTS:
    add("script/" + name, text)

# Random words drawn from each script's blocks (assigned code points only).
BLOCKS = [
    ("latin_ext", [(0x00C0, 0x024F), (0x1E00, 0x1EFF)]),
    ("greek", [(0x0370, 0x03FF), (0x1F00, 0x1FFF)]),
    ("cyrillic", [(0x0400, 0x052F)]),
    ("armenian", [(0x0531, 0x058F)]),
    ("hebrew", [(0x0591, 0x05F4)]),
    ("arabic", [(0x0600, 0x06FF), (0x0750, 0x077F)]),
    ("devanagari", [(0x0900, 0x097F)]),
    ("bengali", [(0x0980, 0x09FF)]),
    ("tamil", [(0x0B80, 0x0BFF)]),
    ("sinhala", [(0x0D80, 0x0DFF)]),
    ("thai", [(0x0E00, 0x0E7F)]),
    ("lao", [(0x0E80, 0x0EFF)]),
    ("tibetan", [(0x0F00, 0x0FFF)]),
    ("myanmar", [(0x1000, 0x109F)]),
    ("georgian", [(0x10A0, 0x10FF), (0x1C90, 0x1CBF)]),
    ("hangul_syllables", [(0xAC00, 0xD7A3)]),
    ("hangul_jamo", [(0x1100, 0x11FF), (0x3130, 0x318F)]),
    ("kana", [(0x3040, 0x30FF), (0xFF66, 0xFF9F)]),
    ("cjk", [(0x4E00, 0x9FFF)]),
    ("cjk_ext_b", [(0x20000, 0x2A6DF)]),
    ("ethiopic", [(0x1200, 0x137F)]),
    ("cherokee", [(0x13A0, 0x13FF), (0xAB70, 0xABBF)]),
    ("mongolian", [(0x1800, 0x18AF)]),
    ("khmer", [(0x1780, 0x17FF)]),
    ("combining_marks", [(0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x20D0, 0x20FF)]),
    ("emoji", [(0x1F300, 0x1FAFF)]),
    ("math_alnum", [(0x1D400, 0x1D7FF)]),
    ("general_punct", [(0x2000, 0x206F)]),
]
for name, ranges in BLOCKS:
    pool = assigned_in(ranges)
    for k in range(2):
        add("script_random/%s/%d" % (name, k), random_words(pool, rng.randint(3, 12), 10))

# ---------------------------------------------------------------------------
# 2. Emoji.
ZWJ = "\u200D"
EMOJI = [
    ("simple", "😀😃😄😁😆 🙂 🙃 🫠 🥲 🤌"),
    ("family_zwj", "👨‍👩‍👧‍👦"),
    ("couple_kiss_zwj", "👩‍❤️‍💋‍👨 💑 👩‍❤️‍👩"),
    ("rainbow_pirate_flag", "🏳️‍🌈 🏴‍☠️ 🏳️‍⚧️"),
    ("profession_skin", "👩🏽‍💻 👨🏿‍🚀 🧑🏻‍🔬 👮🏾‍♀️ 🏃🏼‍♂️"),
    ("handshake_multi_skin", "🧑🏿‍🤝‍🧑🏻 👩🏼‍🤝‍👨🏾 🫱🏻‍🫲🏿"),
    ("heart_on_fire", "❤️‍🔥 ❤️‍🩹 😮‍💨 😵‍💫 🐻‍❄️"),
    ("skin_tones", "👍🏻👍🏼👍🏽👍🏾👍🏿 👋🏻 ✋🏿"),
    ("lone_skin_modifier", "🏽"),
    ("flags", "🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷🇨🇳🇮🇳🇧🇷"),
    ("lone_regional_indicator", "🇦"),
    ("odd_regional_indicators", "🇺🇸🇬"),
    ("subdivision_flag_tags", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 🏴󠁧󠁢󠁥󠁮󠁧󠁿 🏴󠁧󠁢󠁷󠁬󠁳󠁿"),
    ("keycaps", "1️⃣2️⃣3️⃣#️⃣*️⃣🔟 0⃣ 9️⃣"),
    ("variation_selectors", "☺︎☺️ ✈️ ✈︎ ♥️ ♥︎ ©️ ™️"),
    ("emoji_in_text", "I ❤️ NY 🗽! Pizza🍕 and 🍺beer, then 😴... #tbt @friend 💯💯"),
    ("emoji_no_space", "abc😀def🎉ghi👨‍👩‍👧jkl"),
    ("emoji_repeated", "😂" * 500),
    ("emoji_zwj_repeated", "👨‍👩‍👧‍👦" * 100),
    ("emoji_dangling_zwj", "👨‍ ‍👩 ‍‍‍ 👨‍‍👩"),
]
for name, text in EMOJI:
    add("emoji/" + name, text)

# ---------------------------------------------------------------------------
# 3. Combining marks.
COMB = [(0x0300, 0x036F)]
comb_pool = assigned_in(COMB)


def zalgo(text, lo, hi):
    return "".join(c + "".join(chr(rng.choice(comb_pool)) for _ in range(rng.randint(lo, hi)))
                   for c in text)


COMBINING = [
    ("decomposed_e_acute", "e\u0301"),
    ("precomposed_vs_decomposed", "caf\u00e9 cafe\u0301 Ame\u0301lie Am\u00e9lie"),
    ("nfd_vietnamese", unicodedata.normalize("NFD", "Tiếng Việt có dấu, Nguyễn Trãi")),
    ("nfkd_mixed", unicodedata.normalize("NFKD", "ﬁ ﬂ ² ½ Ⅻ ＡＢＣ ㍿ é ñ")),
    ("zalgo_light", zalgo("Hello, World!", 1, 3)),
    ("zalgo_heavy", zalgo("ZALGO is coming", 10, 30)),
    ("zalgo_words", zalgo("the quick brown fox jumps over the lazy dog", 0, 8)),
    ("mark_at_start", "\u0301abc"),
    ("mark_after_space", "a \u0301b \u0308"),
    ("mark_only", "\u0301\u0302\u0303\u0304\u0305"),
    ("two_hundred_marks", "a" + "".join(chr(rng.choice(comb_pool)) for _ in range(200))),
    ("enclosing_marks", "a\u20DD b\u20DE 1\u20E3 \u20E3"),
    ("hangul_jamo_decomposed", "\u1112\u1161\u11AB\u1100\u1173\u11AF \u1100\u1161"),
    ("devanagari_virama_zwj", "क्\u200Dष क्\u200Cष क़ क\u093C"),
    ("thai_stacked_tones", "ก่่่่่ ก้้้ ก็็็"),
    ("hebrew_points_stacked", "שָּׁ בְּ ָ"),
    ("arabic_marks_stacked", "بَََِِّّ ـَ ً"),
    ("cgj_and_vs", "a\u034Fb e\uFE0F \u034F"),
]
for name, text in COMBINING:
    add("combining/" + name, text)

# ---------------------------------------------------------------------------
# 4. Invalid UTF-8 (bytes on purpose).
INVALID = [
    ("lone_continuation", b"\x80"),
    ("lone_continuation_in_word", b"abc\x80def"),
    ("continuation_run", b"\x80\x81\x82\xbf"),
    ("continuation_run_100", b"\xbf" * 100),
    ("truncated_2byte_end", b"abc\xc3"),
    ("truncated_2byte_alone", b"\xc3"),
    ("truncated_2byte_then_space", b"\xc3 x"),
    ("truncated_3byte", b"\xe2\x82"),
    ("truncated_3byte_then_valid", b"\xe2\x82\xe2\x82\xac"),
    ("truncated_4byte", b"\xf0\x9f\x98"),
    ("truncated_4byte_then_text", b"\xf0\x9f\x98A\xe2\x82\xac"),
    ("truncated_4byte_1", b"x\xf0y"),
    ("overlong_slash_2", b"\xc0\xaf"),
    ("overlong_c1", b"\xc1\xbf"),
    ("overlong_slash_3", b"\xe0\x80\xaf"),
    ("overlong_slash_4", b"\xf0\x80\x80\xaf"),
    ("overlong_nul", b"a\xc0\x80b"),
    ("overlong_max_3", b"\xe0\x9f\xbf"),
    ("surrogate_high", b"\xed\xa0\x80"),
    ("surrogate_low", b"\xed\xbf\xbf"),
    ("surrogate_pair_cesu8", b"\xed\xa0\xbd\xed\xb8\x80"),
    ("surrogate_in_text", b"ab\xed\xa0\x80cd"),
    ("byte_fe", b"\xfe"),
    ("byte_ff", b"\xff"),
    ("bytes_fe_ff", b"\xfe\xff"),
    ("utf16le_bom_text", b"\xff\xfeh\x00i\x00"),
    ("utf16be_bom_text", b"\xfe\xff\x00h\x00i"),
    ("five_byte_form", b"\xf8\x88\x80\x80\x80"),
    ("six_byte_form", b"\xfc\x84\x80\x80\x80\x80"),
    ("above_10ffff", b"\xf4\x90\x80\x80"),
    ("f5_lead", b"\xf5\x80\x80\x80"),
    ("f7_lead", b"\xf7\xbf\xbf\xbf"),
    ("latin1_text", "café naïve Ångström".encode("latin-1")),
    ("cp1252_quotes", b"\x93hello\x94 \x96 dash \x85"),
    ("all_bytes_ascending", bytes(range(256))),
    ("high_bytes_only", bytes(range(0x80, 0x100))),
    ("invalid_around_special", b"\xff<s>\xff<|eot_id|>\xc3"),
    ("invalid_between_spaces", b"a \xff b \xfe\xfe c"),
    ("invalid_in_emoji", b"\xf0\x9f\x98\x80\xf0\x9f\x98\xf0\x9f\x98\x80"),
    ("invalid_then_combining", b"\xff\xcc\x81"),
    ("bom_then_invalid", b"\xef\xbb\xbf\xff"),
    ("truncated_bom", b"\xef\xbb"),
    ("invalid_in_cjk", "中文".encode() + b"\xe4\xb8" + "字".encode()),
    ("invalid_multiline", b"line1\r\n\xfe\nline\x80 3\n"),
]
for name, data in INVALID:
    add("invalid_utf8/" + name, data)

# ---------------------------------------------------------------------------
# 5. Whitespace.
WS = []
for n in (1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100):
    WS.append(("spaces_%d" % n, " " * n))
for n in (2, 3, 5, 16, 17, 100):
    WS.append(("spaces_%d_between_words" % n, "a" + " " * n + "b"))
WS += [
    ("tab", "\t"),
    ("tabs_3", "\t\t\t"),
    ("space_tab_mix", " \t \t  \t"),
    ("tab_words", "a\tb\t\tc"),
    ("newline", "\n"),
    ("newlines_2", "\n\n"),
    ("newlines_5", "\n\n\n\n\n"),
    ("newline_words", "a\nb"),
    ("paragraph", "a\n\nb"),
    ("space_newline_space", "a \n b"),
    ("space_then_newline", " \n"),
    ("newline_then_space", "\n "),
    ("spaces_newlines_spaces", "  \n  \n  "),
    ("crlf", "a\r\nb\r\n\r\nc"),
    ("cr_alone", "\r"),
    ("cr_cr_lf", "\r\r\n"),
    ("cr_words", "a\rb \r c"),
    ("nbsp", "a\u00a0b"),
    ("nbsp_run", "\u00a0\u00a0\u00a0"),
    ("nbsp_space_mix", "a \u00a0 b\u00a0 c"),
    ("ideographic_space", "日本\u3000語\u3000\u3000"),
    ("line_separator", "a\u2028b"),
    ("paragraph_separator", "a\u2029b"),
    ("nel", "a\u0085b\u0085"),
    ("ogham_space", "a\u1680b"),
    ("en_em_spaces", "a\u2000b\u2001c\u2002d\u2003e\u2004f\u2005g\u2006h\u2007i\u2008j\u2009k\u200Al"),
    ("narrow_nbsp_math_space", "10\u202F000 a\u205Fb"),
    ("vertical_tab_form_feed", "a\x0bb\x0cc"),
    ("leading_spaces", "   hello"),
    ("trailing_spaces", "hello   "),
    ("inner_spaces", "hello   world"),
    ("mixed_ws_between_words", "hello \t\n world"),
    ("space_before_punct", "Hello , world . How are you ? Fine !"),
    ("all_unicode_ws", "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
     "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"),
    ("indent_code", "def f():\n    if x:\n        return 1\n\treturn 2\n"),
    ("trailing_newline_spaces", "end.\n   \n"),
]
for name, text in WS:
    add("whitespace/" + name, text)

# ---------------------------------------------------------------------------
# 6. Numbers.
NUMBERS = [
    ("long_int", "1234567890123"),
    ("pi", "3.14159"),
    ("thousands", "1,000,000"),
    ("negative", "-42 and +17"),
    ("scientific", "+1e-10 6.022e23 1E+3"),
    ("hex_octal_bin", "0x1F 0o17 0b1010 007"),
    ("repeated_digits", "1234567890" * 5),
    ("money", "$1,234.56 €99,99 ¥1000 £3.50"),
    ("time_date", "12:34:56 2024-01-31T23:59:59Z 31/12/1999"),
    ("phone", "+1 (555) 123-4567"),
    ("ip_version", "192.168.0.1 ::1 v1.2.3-rc.4"),
    ("pi_long", "π≈3.141592653589793238462643383279502884197"),
    ("arabic_indic", "٣.١٤ ١٢٣٤٥٦٧٨٩٠ ۱۲۳"),
    ("devanagari_digits", "१२३४५६७८९०"),
    ("super_sub_fractions", "x²³¹ H₂O ½¼¾ ⅓⅔"),
    ("roman_circled_fullwidth", "Ⅻ ⅻ ①②③ ⑩ １２３"),
    ("digits_glued_to_letters", "abc123def4567ghi89"),
    ("random_300_digits", "".join(rng.choice("0123456789") for _ in range(300))),
    ("percent_ranges", "50% 10-20 3..5 1/2 3/4"),
    ("thai_lao_digits", "๑๒๓๔๕ ໑໒໓"),
]
for name, text in NUMBERS:
    add("numbers/" + name, text)

# ---------------------------------------------------------------------------
# 7. Code.
CODE = [
    ("python", 'def greet(name: str) -> str:\n    """Say hello."""\n'
     '    return f"Hello, {name}!\\n"  # comment\n\n'
     'if __name__ == "__main__":\n    print(greet(\'world\'), end="")\n'
     '    xs = [i**2 for i in range(10) if i % 2 == 0]\n'),
    ("cpp", '#include <iostream>\n#include <vector>\n\ntemplate <typename T>\n'
     'auto sum(const std::vector<T>& v) -> T {\n    T s{};\n    for (auto& x : v) s += x;\n'
     '    return s;\n}\n\nint main() {\n    std::cout << "a\\tb\\\\c\\"d" << \'\\n\';\n'
     '    return a<b>c && d->e || !f ? g::h : i[j];\n}\n'),
    ("json", '{"name": "Ünïcödé", "list": [1, 2.5, -3e10, true, false, null], '
     '"nested": {"a\\"b": "c\\\\d", "emoji": "\\ud83d\\ude00", "empty": {}}}'),
    ("shell", "#!/bin/bash\nset -euo pipefail\nfor f in \"$@\"; do\n"
     "  echo 'single $HOME' \"double $HOME\" \\\"escaped\\\" `date` $(pwd)\n"
     "  grep -E '^[a-z]+\\s*=' \"$f\" | sed -e 's/\\\\/\\//g' > /dev/null 2>&1 || true\n"
     "done\nprintf '%s\\n' \"${arr[@]}\"\n"),
    ("javascript", "const re = /^(?:[a-z0-9._%+-]+)@(?:[a-z0-9-]+\\.)+[a-z]{2,}$/iu;\n"
     "const s = `template ${x + 1} literal`;\nconsole.log(s ?? null, a?.b, x => x ** 2);\n"),
    ("html", '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>T&amp;C</title></head>\n'
     '<body><p class="x">Hello&nbsp;<b>world</b> &lt;tag&gt; &#x1F600;</p></body></html>\n'),
    ("sql", "SELECT u.id, COUNT(*) AS n FROM users u LEFT JOIN orders o ON o.uid = u.id\n"
     "WHERE u.name LIKE '%O''Brien%' GROUP BY u.id HAVING n > 10 ORDER BY n DESC;\n"),
    ("latex", "\\begin{equation}\n  \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n"
     "\\end{equation} % comment\n"),
    ("markdown", "# Title\n\n| a | b |\n|---|:-:|\n| 1 | **bold** |\n\n```py\nprint(1)\n```\n"
     "- [x] done\n- [ ] todo\n> quote\n"),
    ("windows_paths", "C:\\Users\\Admin\\Documents\\file.txt \\\\server\\share\\ D:\\\\x\\\\y"),
    ("regex_soup", r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
    ("rust", "fn main() -> Result<(), Box<dyn std::error::Error>> {\n    let v: Vec<u8> = b\"\\xff\\x00\".to_vec();\n"
     "    println!(\"{:?} {}\", v, 'c' as u32);\n    Ok(())\n}\n"),
    ("go", "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tch := make(chan int, 3)\n\tgo func() { ch <- 1 }()\n"
     "\tfmt.Printf(\"%d\\n\", <-ch)\n}\n"),
    ("yaml", "key: value\nlist:\n  - 'quoted: yes'\n  - \"esc\\ttab\"\nanchor: &a {x: 1}\nref: *a\n"),
]
for name, text in CODE:
    add("code/" + name, text)

# ---------------------------------------------------------------------------
# 8. URLs and e-mail addresses.
URLS = [
    ("https_query_fragment", "https://www.example.com/path/to/page.html?query=1&lang=en-US#section-2"),
    ("mailto_plus", "mailto:john.doe+tag@example.co.uk"),
    ("ftp_userinfo_port", "ftp://user:p%40ss@host.example:21/pub/file.tar.gz"),
    ("idn_cyrillic", "https://пример.рф/путь?q=тест"),
    ("punycode", "http://xn--80ak6aa92e.com/"),
    ("email_unicode", "user@例え.jp, José.Ñúñez@ejemplo.es"),
    ("urls_in_text", "See <https://x.org/a_b(c)> and (http://y.com/~user/?a=b,c;d).\n"
     "Email me at a.b-c_d@sub.domain.io!"),
    ("git_ssh", "git@github.com:owner/repo.git ssh://git@host:2222/r.git"),
    ("percent_encoded", "https://e.com/%E4%B8%AD%E6%96%87?x=%20%2F%3F"),
    ("data_uri", "data:text/plain;base64,SGVsbG8sIFdvcmxkIQ=="),
]
for name, text in URLS:
    add("url/" + name, text)

# ---------------------------------------------------------------------------
# 9. Contractions.
CONTRACTIONS = [
    ("lower", "I'm you're he's she'll we've they'd isn't can't won't y'all"),
    ("upper", "I'M YOU'RE HE'S SHE'LL WE'VE THEY'D ISN'T CAN'T"),
    ("bare_suffixes", "'s 'T 'LL 'Re 'rE 'Ve 'M 'D 'd 'S 'lL"),
    ("mixed_case", "It'S tHey'Re WE'll"),
    ("curly_apostrophe", "it’s don’t they’re ’s"),
    ("quotes_and_possessives", "rock 'n' roll, James' car, O'Neil's, 'tis, ''s, don''t, '''"),
    ("after_space", "x 's y 'll z 're"),
    ("after_digit", "the 1990's and 2000'S"),
    ("non_latin_word", "Привет's 日本's"),
    ("double_quotes_in_text", "She said, \"I'll go,\" and left; he didn't."),
]
for name, text in CONTRACTIONS:
    add("contractions/" + name, text)

# ---------------------------------------------------------------------------
# 10. Special-token look-alikes (and the real ones, glued to words).
SPECIAL = [
    ("s", "<s>"),
    ("slash_s", "</s>"),
    ("unk", "<unk>"),
    ("s_slash_s", "<s></s>"),
    ("s_repeated", "<s><s><s>"),
    ("s_spaced_sentence", "<s> Hello </s>"),
    ("hello_s_world", "Hello<s>world"),
    ("hello_slash_s_world", "Hello</s>world"),
    ("unk_glued", "<unk>text<unk>"),
    ("begin_of_text", "<|begin_of_text|>"),
    ("end_of_text", "<|end_of_text|>"),
    ("eot_id", "<|eot_id|>"),
    ("chat_turn", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there!<|eot_id|>"
     "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    ("reserved_5", "<|reserved_special_token_5|>"),
    ("reserved_250", "<|reserved_special_token_250|>"),
    ("reserved_251", "<|reserved_special_token_251|>"),
    ("reserved_99999", "<|reserved_special_token_99999|>"),
    ("partial_begin_of", "<|begin_of"),
    ("partial_s", "<s"),
    ("spaced_s", "< s>"),
    ("upper_s", "<S>"),
    ("spaced_slash_s", "</ s>"),
    ("upper_begin", "<|BEGIN_OF_TEXT|>"),
    ("missing_close", "<|begin_of_text|"),
    ("missing_open", "|begin_of_text|>"),
    ("double_angle_s", "<<s>>"),
    ("nested_eot", "<|<|eot_id|>|>"),
    ("eot_twice", "<|eot_id|><|eot_id|>"),
    ("spaces_around_s", " <s> "),
    ("spaces_around_eot", "  <|eot_id|>  "),
    ("newlines_around_eot", "\n<|eot_id|>\n"),
    ("metaspace_s", "▁<s>"),
    ("hello_space_s", "Hello <s>"),
    ("word_eot_word", "word<|eot_id|>word"),
    ("begin_glued_both", "x<|begin_of_text|>y<|end_of_text|>z"),
    ("python_tag", "<|python_tag|>"),
    ("finetune_pad", "<|finetune_right_pad_id|>"),
    ("pad_mask_cls", "<pad> <mask> [CLS] [SEP] [PAD] [MASK] <|endoftext|> <|im_start|>"),
    ("inst", "[INST] hi [/INST]"),
    ("sys", "<<SYS>>\nsys\n<</SYS>>"),
    ("byte_token_lookalike", "<0x41><0xFF><0x0A> <0x00>"),
    ("metaspace_text", "▁▁Hello▁world ▁"),
    ("bytelevel_text", "ĠĠhello Ċ ĉ Ġ"),
    ("all_specials_mix", "<s><|begin_of_text|></s><unk><|eot_id|><s"),
    ("special_in_emoji_context", "😀<s>😀<|eot_id|>😀"),
    ("special_after_combining", "e\u0301<s>\u0301"),
]
for name, text in SPECIAL:
    add("special/" + name, text)

# ---------------------------------------------------------------------------
# 11. Edge cases: tiny inputs, controls, format characters.
EDGE = [
    ("empty", ""),
    ("single_space", " "),
    ("lone_metaspace", "\u2581"),
    ("lone_G_dot", "\u0120"),
    ("metaspace_word", "\u2581Hello"),
    ("G_dot_word", "\u0120hello"),
    ("letter_a", "a"),
    ("letter_A", "A"),
    ("period", "."),
    ("apostrophe", "'"),
    ("digit_0", "0"),
    ("nul", "\x00"),
    ("nul_in_text", "a\x00b\x00\x00c"),
    ("soh", "\x01"),
    ("esc_ansi", "\x1b[31mred\x1b[0m"),
    ("del", "\x7f"),
    ("all_c0", "".join(chr(i) for i in range(0x20))),
    ("all_c1", "".join(chr(i) for i in range(0x80, 0xA0))),
    ("bom_alone", "\ufeff"),
    ("bom_start", "\ufeffHello"),
    ("bom_middle", "a\ufeffb"),
    ("bom_twice_start", "\ufeff\ufeffx"),
    ("zwsp", "\u200b"),
    ("zwsp_in_word", "a\u200bb\u200b"),
    ("zwj_alone", "\u200d"),
    ("zwnj", "\u200c"),
    ("word_joiner", "a\u2060b"),
    ("soft_hyphen", "hy\u00adphen"),
    ("replacement_char", "\ufffd"),
    ("private_use", "\ue000\uf8ff\U000F0000\U0010FFFD"),
    ("bidi_controls", "abc\u202edef\u202c \u2066x\u2069 \u200e\u200f"),
    ("tag_characters", "a\U000E0041\U000E0042\U000E007F"),
    ("variation_selector_alone", "\ufe0f \U000E0100"),
    ("interlinear_annotation", "\ufff9a\ufffab\ufffb"),
    ("object_replacement", "\ufffc"),
    ("max_bmp_assigned", "\uffe8\ufffd"),
    ("highest_assigned", "\U000E01EF"),
    ("single_emoji", "\U0001F600"),
    ("single_cjk", "\u4e2d"),
    ("single_combining", "\u0301"),
]
for name, text in EDGE:
    add("edge/" + name, text)

# ---------------------------------------------------------------------------
# 12. Long inputs.
cjk_pool = assigned_in([(0x4E00, 0x9FFF)])
LONG = [
    ("word_5000_letters", "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000))),
    ("word_5000_mixed_case", "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
                                     for _ in range(5000))),
    ("a_10000", "a" * 10000),
    ("spaces_10000", " " * 10000),
    ("newlines_5000", "\n" * 5000),
    ("metaspace_3000", "\u2581" * 3000),
    ("G_dot_3000", "\u0120" * 3000),
    ("emoji_2000", "\U0001F600" * 2000),
    ("digits_4000", "".join(rng.choice("0123456789") for _ in range(4000))),
    ("periods_5000", "." * 5000),
    ("ab_5000", "ab" * 5000),
    ("cjk_3000", "".join(chr(rng.choice(cjk_pool)) for _ in range(3000))),
    ("decomposed_e_2000", "e\u0301" * 2000),
    ("diacritic_word_3000", "".join(rng.choice("áéíóúàèìòùâêîôûäëïöüçñßøåæœ") for _ in range(3000))),
    ("special_s_1000", "<s>" * 1000),
    ("eot_1000", "<|eot_id|>" * 1000),
    ("crlf_3000", "\r\n" * 3000),
    ("tab_space_3000", " \t" * 3000),
]
for name, text in LONG:
    add("long/" + name, text)

# ---------------------------------------------------------------------------
# 13. Random byte strings (mostly invalid UTF-8), and UTF-8 with corruption.
# Random bytes can happen to hold a valid sequence of a code point unassigned in
# Unicode 14: such a draw is thrown away and drawn again (deterministically).
for k in range(30):
    n = rng.choice([1, 2, 3, 4, 5, 8, 16, 31, 64, 100, 255, 512, 1000, 2000])
    while True:
        data = bytes(rng.randrange(256) for _ in range(n))
        if all_assigned_after_decoding(data):
            break
    add("random_bytes/%02d" % k, data)

printable_pool = assigned_in([(0x20, 0x7E), (0xA0, 0x2FF), (0x370, 0x3FF), (0x400, 0x4FF),
                              (0x4E00, 0x4FFF), (0x1F600, 0x1F64F)])
for k in range(20):
    s = random_words(printable_pool, rng.randint(5, 40), 8).encode("utf-8")
    while True:
        b = bytearray(s)
        for _ in range(rng.randint(1, 6)):  # corrupt: flip, delete, insert
            op = rng.randrange(3)
            i = rng.randrange(len(b))
            if op == 0:
                b[i] = rng.randrange(256)
            elif op == 1:
                del b[i]
            else:
                b.insert(i, rng.choice([0x80, 0xBF, 0xC0, 0xC3, 0xE2, 0xED, 0xF0, 0xF4, 0xF8, 0xFE, 0xFF]))
            if not b:
                b = bytearray(b"x")
        if all_assigned_after_decoding(bytes(b)):
            break
    add("corrupted_utf8/%02d" % k, bytes(b))

# ---------------------------------------------------------------------------
# 14. Random strings of random (Unicode 14 assigned) code points.
# Private-use code points (Co) are left out here: planes 15 and 16 alone would
# make up half of the pool (edge/private_use has a few).
all_assigned = [cp for cp in range(0x110000)
                if assigned(cp) and unicodedata.category(chr(cp)) != "Co"]
# Group into 128-code-point chunks so that rare scripts are as likely as CJK.
chunks = {}
for cp in all_assigned:
    chunks.setdefault(cp >> 7, []).append(cp)
chunk_keys = sorted(chunks)
bmp_assigned = [cp for cp in all_assigned if cp < 0x10000]


def chunky_char():
    return chr(rng.choice(chunks[rng.choice(chunk_keys)]))


for k in range(25):
    n = rng.choice([1, 2, 3, 5, 10, 20, 50, 100, 300])
    add("random_cp/uniform/%02d" % k, "".join(chr(rng.choice(all_assigned)) for _ in range(n)))
for k in range(25):
    n = rng.choice([1, 2, 3, 5, 10, 20, 50, 100, 300])
    add("random_cp/by_block/%02d" % k, "".join(chunky_char() for _ in range(n)))
for k in range(15):
    n = rng.choice([5, 20, 100, 500])
    add("random_cp/bmp/%02d" % k, "".join(chr(rng.choice(bmp_assigned)) for _ in range(n)))
ascii_words = ["the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for",
               "on", "are", "as", "with", "his", "they", "I", "at", "be", "this", "have", "from"]
for k in range(20):
    parts = []
    for _ in range(rng.randint(5, 30)):
        r = rng.random()
        if r < 0.5:
            parts.append(rng.choice(ascii_words))
        elif r < 0.8:
            parts.append("".join(chunky_char() for _ in range(rng.randint(1, 4))))
        else:
            parts.append(rng.choice([" ", "  ", "\n", "\t", ".", ",", "'s", "'LL", "<s>",
                                     "<|eot_id|>", "\u00a0", "\u3000", "123", "\u2581"]))
        parts.append(rng.choice(["", " ", " ", " "]))
    add("random_cp/mixed_with_ascii/%02d" % k, "".join(parts))

# ---------------------------------------------------------------------------
# 15. A multi-script mixture (medium length), and ~1 MB of English-like text.
mix_sources = [t for _, t in SCRIPTS] + [t for _, t in EMOJI[:10]] + [t for _, t in NUMBERS]
mix = []
while sum(len(x) for x in mix) < 50000:
    mix.append(rng.choice(mix_sources))
    mix.append(rng.choice([" ", "\n", " — ", "\n\n", ", ", " <s> ", "<|eot_id|>", "\t"]))
add("mixed/multiscript_50k_chars", "".join(mix))

WORDS = """the be to of and a in that have I it for not on with he as you do at this but his by from
they we say her she or an will my one all would there their what so up out if about who get which go
me when make can like time no just him know take people into year your good some could them see other
than then now look only come its over think also back after use two how our work first well way even
new want because any these give day most us is was are were been has had did said went made
water air fire earth river mountain forest city village road bridge house garden window door table
chair book letter paper story history science music art language word sentence number question answer
problem reason idea plan system program computer network machine model token tokenizer vocabulary
byte string character encoding decoding unicode space line paragraph document file folder data value
small large long short old young early late high low great little own other same different important
public private real best better sure free full easy hard clear simple special whole certain possible
quickly slowly carefully quietly suddenly finally often never always sometimes usually already still
run walk read write speak listen learn teach build break open close begin end start stop move turn
morning evening night week month summer winter spring autumn weather rain snow wind sun moon star
London Paris Berlin Tokyo Alice Bob Charlie Mary John Smith Thames Atlantic Monday Friday January
""".split()
CONTRACTION_WORDS = ["don't", "it's", "I'm", "we're", "they've", "she'll", "can't", "won't",
                     "isn't", "he'd", "you're", "that's", "there's", "let's", "o'clock"]
TARGET = 1 << 20  # about 1 MB
out = []
size = 0
while size < TARGET:
    para = []
    for _ in range(rng.randint(3, 8)):
        n = rng.randint(5, 22)
        words = []
        for i in range(n):
            r = rng.random()
            if r < 0.04:
                w = rng.choice(CONTRACTION_WORDS)
            elif r < 0.07:
                w = rng.choice([str(rng.randint(0, 100)), str(rng.randint(1000, 2030)),
                                "%d,%03d" % (rng.randint(1, 999), rng.randint(0, 999)),
                                "%d.%d" % (rng.randint(0, 99), rng.randint(0, 99))])
            else:
                w = rng.choice(WORDS)
            if i > 0 and rng.random() < 0.08:
                words[-1] += rng.choice([",", ",", ";", ":", " -"])
            words.append(w)
        s = " ".join(words)
        s = s[0].upper() + s[1:]
        if rng.random() < 0.1:
            s = "\"" + s + rng.choice([".\"", "?\"", "!\""])
        elif rng.random() < 0.05:
            s = "(" + s + ".)"
        else:
            s += rng.choice([".", ".", ".", ".", "?", "!", "...", "."])
        para.append(s)
    text = " ".join(para) + rng.choice(["\n\n", "\n\n", "\n", "\n\n\n"])
    out.append(text)
    size += len(text)
english = "".join(out)
add("english/1mb", english)

# ---------------------------------------------------------------------------
# Check and write.
for name, data in items:
    for ch in sorted(set(data.decode("utf-8", errors="replace"))):
        if not assigned(ord(ch)):
            die("item %s has U+%04X, not assigned in Unicode %s" % (name, ord(ch), UNICODE_VERSION))

if len(items) < 300:
    die("only %d items" % len(items))

if len(sys.argv) != 2:
    die("usage: make_corpus.py CORPUS.jsonl")

with open(sys.argv[1], "w", encoding="ascii", newline="\n") as f:
    for name, data in items:
        f.write(json.dumps({"name": name, "b64": base64.b64encode(data).decode("ascii")},
                           ensure_ascii=True) + "\n")

n_invalid = 0
for _, data in items:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        n_invalid += 1
sys.stderr.write("make_corpus.py: wrote %d items, %d bytes (%d not valid UTF-8) to %s\n"
                 % (len(items), sum(len(d) for _, d in items), n_invalid, sys.argv[1]))
