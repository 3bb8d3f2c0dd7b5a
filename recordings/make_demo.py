"""Generate the shipped demo benchmark (recordings/demo/) with espeak-ng.

    python recordings/make_demo.py [--out recordings/demo] [--seed 0]
    python recordings/make_demo.py --heldout      # recordings/demo-heldout: other voices


Writes 60 samples (12 emotions x 5 languages: en, hi, ar, it, tl) as a JSONL manifest plus OGG
Vorbis audio at 16 kHz mono, and ``neutral.ogg`` (the utterance the fake "neutral" model plays).
espeak-ng is needed only to regenerate the demo, never to use it (``apt-get install espeak-ng``).

How a sample is built (see recordings/README.md):
  * context = Speaker A (voice variant +m3) in 2-3 utterances separated by 0.3-0.8 s pauses,
    sometimes with a short neutral backchannel of Speaker B (+f3) in the middle, 8-11 s long,
    ending <= 50 ms after Speaker A's last speech; context_turn_start_s marks A's final turn.
  * reference = Speaker B's one-utterance reply (2-5 s) in the same emotion.
  * emotion is rendered only through prosody: the per-emotion espeak-ng settings below.

Tagalog: espeak-ng 1.51 has no Tagalog voice, so Tagalog text is read with the Indonesian voice
``id``; the particle "ng", "mga" and a few English loanwords are respelled for it ("nang",
"manga", "kyut", ...), see TTS_RESPELL.  Arabic is partly vocalised (harakat on the words that
espeak-ng otherwise reads as bare consonant clusters).

Every file is peak-normalised to -3 dBFS, so the amplitude setting (-a) shapes the level of
Speaker A against Speaker B's backchannel inside a context, not the overall level of a file.

espeak-ng has no pitch-range command-line option (no -P), so pitch range is set with SSML
``<prosody range="N">`` (0-100, 50 = espeak default), which needs -m.  Note that ``-q`` must not be
combined with ``-w``: espeak-ng 1.51 then writes no file at all.
"""

from __future__ import annotations

import argparse
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

try:
    import numpy as np
    import soundfile as sf
    import soxr
except ImportError as exc:  # pragma: no cover - depends on the environment
    sys.exit(f"make_demo.py: {exc.name} is missing; install the project first (pip install -e .)")

# --------------------------------------------------------------------------------------------
# Data tables
# --------------------------------------------------------------------------------------------

SR = 16_000  # output sample rate
PEAK_DBFS = -3.0  # every file is peak-normalised to this
NOISE_DBFS = -60.0  # seeded white noise floor (RMS), so pauses are not digital zero
CONTEXT_RANGE_S = (8.0, 11.0)
CONTEXT_TARGET_S = (9.0, 10.5)  # seeded preferred context length
REFERENCE_RANGE_S = (2.0, 5.0)
REFERENCE_FIT_S = (2.2, 4.8)  # re-render with a nudged rate outside this window
NEUTRAL_FIT_S = (2.3, 2.7)  # neutral.ogg: ~2.5 s
PAUSE_S = (0.3, 0.8)
TAIL_S = 0.03  # silence kept after the last speech of an utterance (context tail <= 50 ms)
LEAD_S = 0.01  # silence kept before the first speech of an utterance

VOICE_A = "+m3"  # Speaker A: male 3
VOICE_B = "+f3"  # Speaker B: female 3 (replies, backchannels, neutral.ogg)
# The held-out set: voices the prosody scorer was never calibrated on (A about 94 Hz against
# +m3's 104 Hz, B about 176 Hz against +f3's 211 Hz), two languages; a check of the scorer that
# is not in-sample (tests/test_prosody_heldout.py).
HELDOUT_VOICES = ("+m1", "+f4")
HELDOUT_LANGUAGES = ("en", "hi", "ar", "it", "tl")


@dataclass(frozen=True)
class Prosody:
    rate: int  # -s, words per minute (default 175)
    pitch: int  # -p, 0-99 (default 50)
    range: int  # SSML <prosody range>, 0-100 (default 50)
    amp: int  # -a, 0-200 (default 100)
    gap: int  # -g, extra pause between words, 10 ms units (default 0)
    reply_gap_s: tuple[float, float]  # seeded gap_s range for B's reply


# Per-emotion espeak-ng settings (same for Speaker A's context and Speaker B's reply).
#                                 rate pitch range amp gap  gap_s
PROSODY: dict[str, Prosody] = {
    "Amusement":          Prosody(190, 62, 75, 115, 0, (0.20, 0.50)),
    "Anger":              Prosody(200, 70, 25, 170, 0, (0.20, 0.40)),
    "Elation":            Prosody(205, 75, 90, 140, 0, (0.20, 0.45)),
    "Impatience":         Prosody(215, 55, 35, 135, 0, (0.20, 0.35)),
    "Surprise":           Prosody(185, 80, 95, 135, 1, (0.20, 0.45)),
    "Emotional Numbness": Prosody(140, 35, 3, 75, 2, (0.60, 1.00)),
    "Contemplation":      Prosody(135, 42, 35, 85, 4, (0.60, 1.00)),
    "Disappointment":     Prosody(140, 38, 20, 85, 2, (0.50, 0.90)),
    "Confusion":          Prosody(150, 55, 65, 95, 3, (0.40, 0.80)),
    "Pride":              Prosody(160, 48, 60, 135, 1, (0.30, 0.60)),
    "Affection":          Prosody(145, 58, 60, 80, 1, (0.30, 0.70)),
    "Sadness":            Prosody(120, 30, 12, 65, 3, (0.60, 1.00)),
}  # fmt: skip
NEUTRAL = Prosody(165, 50, 50, 100, 0, (0.30, 0.60))  # B's backchannels and neutral.ogg

# language -> espeak-ng voice (Tagalog has none: read with Indonesian, see module docstring)
ESPEAK_VOICE: dict[str, str] = {"en": "en-us", "hi": "hi", "ar": "ar", "it": "it", "tl": "id"}

# Respellings applied to the text handed to espeak-ng (the script's text stays native).
TTS_RESPELL: dict[str, tuple[tuple[str, str], ...]] = {
    "tl": (
        (r"\bng\b", "nang"),
        (r"\bmga\b", "manga"),
        (r"\bcute\b", "kyut"),
        (r"\bflight\b", "flayt"),
        (r"\baccount\b", "akawnt"),
        (r"\baudition\b", "odisyon"),
    ),
}

NEUTRAL_TEXT = "Okay, I see what you mean. Tell me more."

# Optional neutral-content first utterance of Speaker A (spoken in A's emotion).
OPENERS: dict[str, tuple[str, ...]] = {
    "en": ("So, listen to this.", "You know what happened?", "Okay, so, here is the thing."),
    "hi": ("अरे, सुनो ना।", "पता है क्या हुआ?", "अच्छा, तो बात यह है।"),
    "ar": ("اسمعي هذا.", "هل تعرفين ماذا حدث؟", "حَسَنًا، المَوضوعُ هو هذا."),
    "it": ("Allora, senti questa.", "Sai cosa è successo?", "Dunque, la cosa è questa."),
    "tl": ("Uy, makinig ka.", "Alam mo ba ang nangyari?", "O sige, ganito kasi iyon."),
}

# Short neutral backchannels of Speaker B, optionally placed before A's final turn.
BACKCHANNELS: dict[str, tuple[str, ...]] = {
    "en": ("Really?", "And then?", "Oh, what happened?", "Go on."),
    "hi": ("सच में?", "फिर क्या हुआ?", "अच्छा?", "हाँ, बोलो।"),
    "ar": ("حقا؟", "ثم ماذا؟", "وَبَعدُ؟", "نعم، أَكمِل."),
    "it": ("Davvero?", "E poi?", "Ah sì?", "Dimmi."),
    "tl": ("Talaga?", "Tapos?", "Ano ang nangyari?", "Sige, ituloy mo."),
}


@dataclass(frozen=True)
class Script:
    setup: str  # Speaker A, first emotional utterance
    final: str  # Speaker A, final turn (B replies to this)
    reply: str  # Speaker B, the reference reply


# TEXTS[language][emotion]; Speaker A is male, Speaker B female (Hindi, Arabic, Italian agree).
TEXTS: dict[str, dict[str, Script]] = {
    "en": {
        "Amusement": Script(
            "Okay, you know my cat, right? Guess what she did this morning.",
            "She climbed into the laundry basket and fell asleep on my clean shirts, ha ha!",
            "Ha ha, that is adorable, she totally owns you now!",
        ),
        "Anger": Script(
            "They cancelled my flight again, without any warning, and I fly out tomorrow.",
            "This is the third time this month, and nobody even apologised!",
            "That is completely unacceptable, they cannot treat you like that!",
        ),
        "Elation": Script(
            "I just opened the email from the university, the one I waited for all year!",
            "I got in! I actually got in, with a full scholarship!",
            "Oh my goodness, that is amazing, I am so happy for you!",
        ),
        "Impatience": Script(
            "We have been waiting here for forty minutes, and nobody has even looked at us.",
            "Can we please just order something and get going? Come on!",
            "Yes, yes, fine, let us just go, hurry up!",
        ),
        "Surprise": Script(
            "I was walking home from the station last night, in the rain.",
            "And suddenly, my old teacher from school was standing right there!",
            "No way! Really? After all these years?",
        ),
        "Emotional Numbness": Script(
            "They told me the results this morning.",
            "I don't know. I don't really feel anything about it anymore.",
            "Okay. It is what it is, I suppose.",
        ),
        "Contemplation": Script(
            "I keep thinking about what you said the other day.",
            "Maybe a slower life would make us happier, in the long run.",
            "Hmm. Perhaps. I wonder what we would give up.",
        ),
        "Disappointment": Script(
            "I practised for weeks for that audition.",
            "And they did not even let me finish the first song.",
            "Oh no. What a letdown, after all that work.",
        ),
        "Confusion": Script(
            "The letter says I owe them money, but I paid last month.",
            "Wait, so which account is this for? I really don't get it.",
            "Hang on, that makes no sense. Which bill?",
        ),
        "Pride": Script(
            "Remember the little garden I started in spring?",
            "It won first prize at the town fair today, out of fifty entries!",
            "You should be really proud, you earned every bit of it.",
        ),
        "Affection": Script(
            "I found the photo from our first trip together.",
            "You looked so happy on that beach. I really missed you.",
            "Oh, sweetheart, I missed you too, so very much.",
        ),
        "Sadness": Script(
            "The vet called this afternoon.",
            "Our old dog passed away in his sleep last night.",
            "I am so sorry. He was such a gentle soul.",
        ),
    },
    "hi": {
        "Amusement": Script(
            "अरे, तुम्हें मेरी बिल्ली याद है ना? आज सुबह उसने क्या किया, पता है?",
            "वह कपड़ों की टोकरी में घुसकर मेरी साफ़ कमीज़ों पर सो गई, हा हा!",
            "हा हा, कितनी प्यारी है, अब तो वही घर की मालकिन है!",
        ),
        "Anger": Script(
            "उन्होंने फिर से मेरी फ़्लाइट रद्द कर दी, बिना कोई सूचना दिए।",
            "इस महीने यह तीसरी बार है, और किसी ने माफ़ी तक नहीं माँगी!",
            "यह बिल्कुल गलत है, वे तुम्हारे साथ ऐसा नहीं कर सकते!",
        ),
        "Elation": Script(
            "मैंने अभी अभी विश्वविद्यालय का वह ईमेल खोला, जिसका पूरे साल से इंतज़ार था!",
            "मेरा दाखिला हो गया! सच में हो गया, पूरी छात्रवृत्ति के साथ!",
            "अरे वाह, यह तो कमाल है, मैं तुम्हारे लिए बहुत खुश हूँ!",
        ),
        "Impatience": Script(
            "हम यहाँ चालीस मिनट से इंतज़ार कर रहे हैं, और किसी ने हमारी तरफ़ देखा भी नहीं।",
            "क्या हम बस कुछ मँगवाकर निकल सकते हैं? चलो भी!",
            "हाँ हाँ, ठीक है, चलो, अब जल्दी करो!",
        ),
        "Surprise": Script(
            "कल रात बारिश में मैं स्टेशन से घर पैदल जा रहा था।",
            "और अचानक, मेरे स्कूल के पुराने टीचर ठीक सामने खड़े थे!",
            "क्या? सच में? इतने सालों बाद?",
        ),
        "Emotional Numbness": Script(
            "उन्होंने आज सुबह मुझे नतीजे बता दिए।",
            "पता नहीं। अब मुझे इसके बारे में कुछ भी महसूस नहीं होता।",
            "ठीक है। जो है, सो है।",
        ),
        "Contemplation": Script(
            "तुमने उस दिन जो कहा, मैं उसी के बारे में सोचता हूँ।",
            "शायद धीमी ज़िंदगी हमें ज़्यादा खुश रखेगी।",
            "हम्म। शायद। पर हम क्या छोड़ देंगे?",
        ),
        "Disappointment": Script(
            "मैंने उस ऑडिशन के लिए हफ़्तों तक अभ्यास किया था।",
            "और उन्होंने मुझे पहला गाना भी पूरा नहीं करने दिया।",
            "ओह नहीं। इतनी मेहनत के बाद, बहुत बुरा हुआ।",
        ),
        "Confusion": Script(
            "चिट्ठी कहती है कि मुझे पैसे देने हैं, पर मैंने तो दे दिए थे।",
            "रुको, यह किस खाते का है? समझ नहीं आ रहा।",
            "एक मिनट, इसका कोई मतलब नहीं। कौन सा बिल?",
        ),
        "Pride": Script(
            "याद है, वसंत में मैंने जो छोटा सा बगीचा शुरू किया था?",
            "आज उसे शहर के मेले में पहला इनाम मिला, पचास में से!",
            "तुम्हें सच में गर्व होना चाहिए, यह तुम्हारी मेहनत का फल है।",
        ),
        "Affection": Script(
            "मुझे हमारी पहली यात्रा की वह तस्वीर मिल गई।",
            "तुम उस समुद्र तट पर कितनी खुश लग रही थीं। मुझे तुम्हारी बहुत याद आई।",
            "ओह, मेरी जान, मुझे भी तुम्हारी बहुत याद आई।",
        ),
        "Sadness": Script(
            "आज दोपहर जानवरों के डॉक्टर का फ़ोन आया था।",
            "हमारा बूढ़ा कुत्ता कल रात नींद में ही चल बसा।",
            "मुझे बहुत दुख है। वह कितना प्यारा था।",
        ),
    },
    "ar": {
        "Amusement": Script(
            "هل تَذكُرينَ قِطَّتي؟ خَمِّني ماذا فَعَلَت هذا الصباح.",
            "دَخَلَت سَلَّةَ الغَسيل ونامَت فَوقَ قُمصاني النَّظيفة، ها ها!",
            "ها ها، هذا لطيف جدا، إنها تَملِكُ البيت الآن!",
        ),
        "Anger": Script(
            "لَقَد أَلغَوا رِحلَتي مرة أخرى، من دون أي إنذار.",
            "هذه ثالث مرة هذا الشهر، ولم يَعتَذِر أحد أبدا!",
            "هذا غير مقبول أبدا، لا يَحِقُّ لهم أن يعاملوك هكذا!",
        ),
        "Elation": Script(
            "لَقَد فَتَحتُ الآن رسالة الجامعة التي اِنتَظَرتُها طوال السنة!",
            "لَقَد قُبِلتُ! قُبِلتُ فِعلًا، مع منحة كامِلة!",
            "يا إلهي، هذا رائع، أنا سَعيدة جدا من أَجلِك!",
        ),
        "Impatience": Script(
            "نَحنُ نَنتَظِرُ هنا منذ أربعين دقيقة، ولم يَنظُر إلينا أحد حتى الآن.",
            "هل يُمكِنُنا أن نَطلُبَ أي شيء ونَذهَب؟ هيا بنا!",
            "نعم نعم، حَسَنًا، لِنَذهَب بِسُرعة الآن!",
        ),
        "Surprise": Script(
            "كُنتُ أمشي إلى البيت من المحطة ليلة أمس.",
            "وفَجأةً، كان مُعَلِّمي القديم من المدرسة واقفا أمامي!",
            "مستحيل! حقا؟ بعد كل هذه السنين؟",
        ),
        "Emotional Numbness": Script(
            "أَخبَروني بِالنَّتائِج هذا الصباح.",
            "لا أعرف. لم أَعُد أشعر بأي شيء تجاه ذلك.",
            "حَسَنًا. هذا هو الواقع.",
        ),
        "Contemplation": Script(
            "ما زِلتُ أُفَكِّرُ فيما قُلتِهِ لي ذلك اليوم.",
            "ربما تَجعَلُنا الحياة الهادئة أسعد.",
            "همم. ربما. ماذا سَنَترُك؟",
        ),
        "Disappointment": Script(
            "تَدَرَّبتُ لأسابيع من أَجلِ تِلكَ التجربة.",
            "ولم يَسمَحوا لي حتى بِإِكمالِ الأُغنِيَة الأولى.",
            "يا لَلأَسَف. هذا مُحبِط جدا.",
        ),
        "Confusion": Script(
            "الرسالة تقول إنني مدين لهم، لَكِنَّني دَفَعتُ.",
            "لحظة، لأي حساب هذا إذن؟ أنا لا أفهم حقا.",
            "مَهلًا، هذا غير منطقي. أي فاتورة؟",
        ),
        "Pride": Script(
            "هل تذكرين الحديقة الصغيرة التي بَدَأتُها في الربيع؟",
            "فازت اليوم بِالجائِزة الأولى في معرض المدينة!",
            "يَجِبُ أن تكون فخورا جدا، لَقَد اِستَحقَقتَ ذلك.",
        ),
        "Affection": Script(
            "وَجَدتُ صورة رِحلَتِنا الأولى معا.",
            "كُنتِ سعيدة جدا على ذلك الشاطئ. اِشتَقتُ إليكِ كثيرا.",
            "آه يا حبيبي، وأنا اِشتَقتُ إليك كثيرا.",
        ),
        "Sadness": Script(
            "اتصل الطبيب البيطري بعد الظهر.",
            "كَلبُنا العجوز مات أثناء نَومِه ليلة أمس.",
            "أنا آسِفة جدا. كان لطيفا جدا.",
        ),
    },
    "it": {
        "Amusement": Script(
            "Allora, ti ricordi la mia gatta? Indovina cosa ha fatto stamattina.",
            "Si è infilata nel cesto del bucato e si è addormentata sulle camicie pulite, ah ah!",
            "Ah ah, che tenera, ormai la padrona di casa è lei!",
        ),
        "Anger": Script(
            "Mi hanno cancellato di nuovo il volo, senza nessun preavviso.",
            "È la terza volta questo mese, e nessuno ha nemmeno chiesto scusa!",
            "È assolutamente inaccettabile, non possono trattarti così!",
        ),
        "Elation": Script(
            "Ho appena aperto l'email dell'università, quella che aspettavo da un anno!",
            "Mi hanno preso! Mi hanno preso davvero, con una borsa di studio completa!",
            "Oddio, è fantastico, sono così felice per te!",
        ),
        "Impatience": Script(
            "Stiamo aspettando qui da quaranta minuti, e il cameriere non ci ha nemmeno guardati.",
            "Possiamo ordinare qualcosa e andarcene, per favore? Dai!",
            "Sì, sì, va bene, andiamo, sbrigati!",
        ),
        "Surprise": Script(
            "Ieri sera tornavo a casa a piedi dalla stazione.",
            "E all'improvviso, il mio vecchio maestro delle elementari era proprio lì davanti!",
            "Ma dai! Davvero? Dopo tutti questi anni?",
        ),
        "Emotional Numbness": Script(
            "Stamattina mi hanno detto i risultati.",
            "Non lo so. Non provo più niente, ormai.",
            "Va bene. È così, suppongo.",
        ),
        "Contemplation": Script(
            "Continuo a pensare a quello che mi hai detto l'altro giorno.",
            "Forse una vita più lenta ci renderebbe più felici, alla lunga.",
            "Mmh, forse. Ma a che prezzo?",
        ),
        "Disappointment": Script(
            "Mi sono preparato per settimane per quel provino.",
            "E non mi hanno nemmeno lasciato finire la prima canzone.",
            "Oh no. Che delusione, dopo tutto quel lavoro.",
        ),
        "Confusion": Script(
            "La lettera dice che devo dei soldi, ma ho pagato il mese scorso.",
            "Aspetta, quindi per quale conto sarebbe? Non capisco proprio.",
            "Un attimo, non ha senso. Di quale bolletta parlano?",
        ),
        "Pride": Script(
            "Ti ricordi il piccolo orto che ho iniziato in primavera?",
            "Oggi ha vinto il primo premio alla fiera del paese, su cinquanta partecipanti!",
            "Devi essere davvero orgoglioso, te lo sei meritato tutto.",
        ),
        "Affection": Script(
            "Ho trovato la foto del nostro primo viaggio insieme.",
            "Eri così felice su quella spiaggia. Mi sei mancata tanto.",
            "Oh, tesoro, mi sei mancato tantissimo anche tu.",
        ),
        "Sadness": Script(
            "Il veterinario ha chiamato oggi pomeriggio.",
            "Il nostro vecchio cane se n'è andato nel sonno stanotte.",
            "Mi dispiace tanto. Era un'anima così dolce.",
        ),
    },
    "tl": {
        "Amusement": Script(
            "Uy, naaalala mo ba ang pusa ko? Hulaan mo kung ano ang ginawa niya kaninang umaga.",
            "Pumasok siya sa basket ng labada at natulog sa malilinis kong damit, ha ha!",
            "Ha ha, ang cute naman, siya na talaga ang amo sa bahay!",
        ),
        "Anger": Script(
            "Kinansela na naman nila ang flight ko, nang walang anumang abiso.",
            "Pangatlong beses na ito ngayong buwan, at wala man lang humingi ng tawad!",
            "Hindi iyan katanggap-tanggap, hindi ka nila puwedeng tratuhin nang ganyan!",
        ),
        "Elation": Script(
            "Binuksan ko na ang email galing sa unibersidad, iyong hinintay ko buong taon!",
            "Tanggap ako! Tanggap talaga ako, may buong iskolarsip pa!",
            "Diyos ko, ang galing, sobrang saya ko para sa iyo!",
        ),
        "Impatience": Script(
            "Apatnapung minuto na tayong naghihintay, at wala pa ring pumapansin sa atin.",
            "Puwede bang umorder na lang tayo at umalis? Sige na!",
            "Oo, oo, sige na, tara na, bilisan mo!",
        ),
        "Surprise": Script(
            "Naglalakad ako pauwi galing sa istasyon kagabi.",
            "Tapos biglang nandoon sa harap ko ang dati kong guro sa elementarya!",
            "Talaga? Hindi nga? Pagkatapos ng ilang taon?",
        ),
        "Emotional Numbness": Script(
            "Sinabi na nila sa akin ang resulta kaninang umaga.",
            "Ewan ko. Wala na talaga akong nararamdaman tungkol doon.",
            "Sige. Ganoon talaga siguro.",
        ),
        "Contemplation": Script(
            "Iniisip ko pa rin ang sinabi mo.",
            "Siguro mas magiging masaya tayo sa mas mabagal na buhay.",
            "Hmm. Baka nga. Pero ano ang kapalit?",
        ),
        "Disappointment": Script(
            "Ilang linggo akong nagsanay para sa audition na iyon.",
            "Hindi man lang nila ako pinatapos sa unang kanta.",
            "Naku. Sayang naman ang pagod mo.",
        ),
        "Confusion": Script(
            "Sabi ng sulat may utang ako, pero nagbayad na ako.",
            "Teka, para saang account ba ito? Hindi ko maintindihan.",
            "Sandali, walang saysay iyan. Aling bill?",
        ),
        "Pride": Script(
            "Naaalala mo ba ang maliit na hardin na sinimulan ko noong Marso?",
            "Nanalo ito ng unang gantimpala sa pista ng bayan ngayon!",
            "Dapat talaga ipagmalaki mo iyan, pinaghirapan mo iyan.",
        ),
        "Affection": Script(
            "Nakita ko ang litrato ng una nating biyahe nang magkasama.",
            "Ang saya-saya mo sa dalampasigang iyon. Miss na miss kita.",
            "Naku, mahal ko, miss na miss din kita.",
        ),
        "Sadness": Script(
            "Tumawag ang beterinaryo kaninang hapon.",
            "Namatay ang matanda nating aso habang natutulog kagabi.",
            "Nakikiramay ako. Napakabait niyang aso.",
        ),
    },
}

LANGUAGES: tuple[str, ...] = tuple(TEXTS)

# --------------------------------------------------------------------------------------------
# Synthesis
# --------------------------------------------------------------------------------------------


class DemoError(Exception):
    """A failure reported as one line, without a traceback."""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def tts_text(language: str, text: str) -> str:
    for pattern, repl in TTS_RESPELL.get(language, ()):
        text = re.sub(pattern, repl, text)
    return text


def espeak(
    text: str, language: str, variant: str, prosody: Prosody, rate: int | None = None
) -> np.ndarray:
    """Synthesise one utterance; float32 mono at SR, leading/trailing silence trimmed."""
    voice = ESPEAK_VOICE[language] + variant
    body = html.escape(tts_text(language, text))
    ssml = f'<speak><prosody range="{prosody.range}">{body}</prosody></speak>'
    with tempfile.TemporaryDirectory(prefix="make_demo_") as tmp:
        wav = Path(tmp) / "utt.wav"
        # No -q: with -q espeak-ng 1.51 writes no file.  -z: no final sentence pause.
        cmd = [
            "espeak-ng", "-b", "1", "-m", "-z", "-v", voice,
            "-s", str(rate or prosody.rate), "-p", str(prosody.pitch),
            "-a", str(prosody.amp), "-g", str(prosody.gap), "-w", str(wav), ssml,
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not wav.is_file():
            msg = (proc.stderr.strip().splitlines() or ["no output file"])[-1]
            raise DemoError(f"espeak-ng failed for voice {voice}: {msg}")
        x, sr = sf.read(wav, dtype="float32", always_2d=True)
    x = soxr.resample(x[:, 0], sr, SR, quality="HQ").astype(np.float32)
    return trim(x)


def speech_bounds(x: np.ndarray, floor_db: float = -40.0) -> tuple[int, int]:
    """First and one-past-last sample of 10 ms frames within floor_db of the loudest frame."""
    hop = SR // 100
    n = len(x) // hop
    if n == 0:
        raise DemoError("espeak-ng produced no audio")
    rms = np.sqrt(np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1)) + 1e-12
    loud = np.flatnonzero(20 * np.log10(rms / rms.max()) > floor_db)
    return int(loud[0] * hop), int((loud[-1] + 1) * hop)


def trim(x: np.ndarray) -> np.ndarray:
    start, end = speech_bounds(x)
    return x[max(0, start - int(LEAD_S * SR)) : min(len(x), end + int(TAIL_S * SR))]


def seconds(x: np.ndarray) -> float:
    return len(x) / SR


def fit_rate(
    text: str, language: str, variant: str, prosody: Prosody, window: tuple[float, float]
) -> tuple[np.ndarray, int]:
    """Render at the table's rate; if outside window, nudge the rate (at most 4 tries)."""
    rate = prosody.rate
    x = espeak(text, language, variant, prosody, rate)
    for _ in range(4):
        d = seconds(x)
        if window[0] <= d <= window[1]:
            break
        target = min(max(d, window[0]), window[1]) * (1.02 if d < window[0] else 0.98)
        rate = int(np.clip(round(rate * d / target), 80, 450))
        x = espeak(text, language, variant, prosody, rate)
    return x, rate


def silence(duration_s: float) -> np.ndarray:
    return np.zeros(round(duration_s * SR), dtype=np.float32)


# --------------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Context:
    audio: np.ndarray
    turn_start_s: float
    layout: str


def assemble_context(
    opener: np.ndarray,
    setup: np.ndarray,
    backchannel: np.ndarray,
    final: np.ndarray,
    rng: np.random.Generator,
) -> tuple[Context, list[str]]:
    """Pick the layout (with/without opener, with/without B's backchannel) nearest a seeded
    target length inside CONTEXT_RANGE_S; returns the context and any warnings."""
    target = rng.uniform(*CONTEXT_TARGET_S)
    pauses = [float(p) for p in rng.uniform(*PAUSE_S, size=3)]
    layouts = {
        "A A": [setup, final],
        "A B A": [setup, backchannel, final],
        "A A A": [opener, setup, final],
        "A A B A": [opener, setup, backchannel, final],
    }

    def total(parts: list[np.ndarray], pause: list[float]) -> float:
        return sum(seconds(p) for p in parts) + sum(pause[: len(parts) - 1])

    lo, hi = CONTEXT_RANGE_S
    inside = {k: v for k, v in layouts.items() if lo <= total(v, pauses) <= hi}
    warnings: list[str] = []
    if inside:
        name = min(inside, key=lambda k: abs(total(inside[k], pauses) - target))
    else:
        name = max(layouts, key=lambda k: total(layouts[k], pauses))
        if total(layouts[name], pauses) < lo:
            pauses = [PAUSE_S[1]] * 3  # all too short: longest pauses, then lead-in silence
            warnings.append("all layouts short; pauses stretched to the maximum")
        else:  # the shortest layout that is too long; its start is cut below
            too_long = [k for k in layouts if total(layouts[k], pauses) > hi]
            name = min(too_long, key=lambda k: total(layouts[k], pauses))
        warnings.append(
            f"no layout fits {lo}-{hi} s; using '{name}' ({total(layouts[name], pauses):.2f} s)"
        )
    parts = layouts[name]
    pieces: list[np.ndarray] = []
    for i, part in enumerate(parts):
        if i:
            pieces.append(silence(pauses[i - 1]))
        pieces.append(part)
    audio = np.concatenate(pieces)
    turn_start = len(audio) - len(final)
    if seconds(audio) < lo:  # still short: lead-in silence (warned above)
        pad = silence(lo - seconds(audio) + 0.05)
        audio, turn_start = np.concatenate([pad, audio]), turn_start + len(pad)
    elif seconds(audio) > hi:  # too long: cut the start, never into the final turn
        cut = min(len(audio) - int((hi - 0.05) * SR), turn_start)
        audio, turn_start = fade_in(audio[cut:]), turn_start - cut
    return Context(audio, turn_start / SR, name), warnings


def fade_in(x: np.ndarray, duration_s: float = 0.05) -> np.ndarray:
    n = min(len(x), int(duration_s * SR))
    y = x.copy()
    y[:n] *= np.linspace(0.0, 1.0, n, dtype=np.float32)
    return y


def finish(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Peak-normalise to PEAK_DBFS and add the seeded noise floor."""
    y = x * (10 ** (PEAK_DBFS / 20) / float(np.max(np.abs(x))))
    y = y + rng.standard_normal(len(y)).astype(np.float32) * 10 ** (NOISE_DBFS / 20)
    return np.clip(y, -1.0, 1.0).astype(np.float32)


def _ogg_crc_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        r = i << 24
        for _ in range(8):
            r = ((r << 1) ^ 0x04C11DB7) if r & 0x80000000 else r << 1
        table.append(r & 0xFFFFFFFF)
    return tuple(table)


_OGG_CRC = _ogg_crc_table()


def ogg_crc(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFFFFFF) ^ _OGG_CRC[(crc >> 24) ^ byte]
    return crc


def pin_ogg_serial(data: bytes, serial: int) -> bytes:
    """libsndfile gives each Ogg stream a random serial number; pin it (and redo each page's CRC)
    so that rerunning the script writes byte-identical files."""
    out = bytearray(data)
    pos = 0
    while pos < len(out):
        if out[pos : pos + 4] != b"OggS":
            raise DemoError("unexpected Ogg page layout from libsndfile")
        nseg = out[pos + 26]
        size = 27 + nseg + sum(out[pos + 27 : pos + 27 + nseg])
        out[pos + 14 : pos + 18] = serial.to_bytes(4, "little")
        out[pos + 22 : pos + 26] = bytes(4)
        out[pos + 22 : pos + 26] = ogg_crc(out[pos : pos + size]).to_bytes(4, "little")
        pos += size
    return bytes(out)


def write_ogg(path: Path, x: np.ndarray) -> None:
    buf = io.BytesIO()
    sf.write(buf, x, SR, format="OGG", subtype="VORBIS")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(pin_ogg_serial(buf.getvalue(), zlib.crc32(path.name.encode("utf-8"))))
    os.replace(tmp, path)


def write_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def sample_rng(seed: int, key: str) -> np.random.Generator:
    """Per-sample generator: independent of generation order and of Python's hash seed."""
    return np.random.default_rng([seed, zlib.crc32(key.encode("utf-8"))])


def make_sample(
    language: str,
    emotion: str,
    seed: int,
    audio_dir: Path,
    voices: tuple[str, str] = (VOICE_A, VOICE_B),
) -> tuple[dict[str, object], list[str]]:
    sample_id = f"{language}-{slug(emotion)}-1"
    rng = sample_rng(seed, sample_id)
    script, prosody = TEXTS[language][emotion], PROSODY[emotion]
    opener_text = OPENERS[language][int(rng.integers(len(OPENERS[language])))]
    backchannel_text = BACKCHANNELS[language][int(rng.integers(len(BACKCHANNELS[language])))]
    gap_s = round(float(rng.uniform(*prosody.reply_gap_s)), 2)

    voice_a, voice_b = voices
    context, warnings = assemble_context(
        espeak(opener_text, language, voice_a, prosody),
        espeak(script.setup, language, voice_a, prosody),
        espeak(backchannel_text, language, voice_b, NEUTRAL),
        espeak(script.final, language, voice_a, prosody),
        rng,
    )
    reply, rate = fit_rate(script.reply, language, voice_b, prosody, REFERENCE_FIT_S)
    if rate != prosody.rate:
        warnings.append(f"reference rate nudged {prosody.rate} -> {rate} wpm")

    context_name, reference_name = f"{sample_id}.context.ogg", f"{sample_id}.reference.ogg"
    write_ogg(audio_dir / context_name, finish(context.audio, rng))
    write_ogg(audio_dir / reference_name, finish(reply, rng))
    print(
        f"{sample_id:28s} context {seconds(context.audio):5.2f} s [{context.layout:7s}] "
        f"turn@{context.turn_start_s:5.2f}  reference {seconds(reply):4.2f} s  gap {gap_s:.2f}"
    )
    entry: dict[str, object] = {
        "id": sample_id,
        "language": language,
        "emotion": emotion,
        "context": f"audio/{context_name}",
        "reference": f"audio/{reference_name}",
        "context_turn_start_s": round(context.turn_start_s, 3),
        "gap_s": gap_s,
        "source_id": f"demo/{language}/{slug(emotion)}",
    }
    return entry, [f"{sample_id}: {w}" for w in warnings]


def make_neutral(out: Path, seed: int, voice_b: str = VOICE_B) -> float:
    x, _ = fit_rate(NEUTRAL_TEXT, "en", voice_b, NEUTRAL, NEUTRAL_FIT_S)
    write_ogg(out / "neutral.ogg", finish(x, sample_rng(seed, "neutral")))
    return seconds(x)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def check_tables() -> None:
    from duplexsim.core.emotions import EMOTION_NAMES

    if set(PROSODY) != set(EMOTION_NAMES):
        raise DemoError("PROSODY must cover exactly the 12 canonical emotions")
    for language, table in TEXTS.items():
        if set(table) != set(EMOTION_NAMES):
            raise DemoError(f"TEXTS[{language!r}] must cover exactly the 12 canonical emotions")


def generate(
    out: Path,
    seed: int,
    voices: tuple[str, str] = (VOICE_A, VOICE_B),
    languages: tuple[str, ...] = LANGUAGES,
) -> None:
    from duplexsim.core.emotions import EMOTION_NAMES

    check_tables()
    audio_dir = out / "audio"
    audio_dir.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, object]] = []
    warnings: list[str] = []
    for language in languages:
        for emotion in EMOTION_NAMES:
            entry, warns = make_sample(language, emotion, seed, audio_dir, voices)
            entries.append(entry)
            warnings.extend(warns)
    neutral_s = make_neutral(out, seed, voices[1])
    entries.sort(key=lambda e: str(e["id"]))
    lines = [json.dumps(e, ensure_ascii=False) for e in entries]
    write_text(out / "manifest.jsonl", "\n".join(lines) + "\n")
    written = {Path(str(e[k])).name for e in entries for k in ("context", "reference")}
    for stale in audio_dir.glob("*.ogg"):
        if stale.name not in written:
            stale.unlink()
    print(f"wrote {len(entries)} samples and neutral.ogg ({neutral_s:.2f} s) to {out}")
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description="Regenerate the demo benchmark with espeak-ng.")
    parser.add_argument("--out", type=Path, help="output directory (default recordings/demo)")
    parser.add_argument("--seed", type=int, default=0, help="seed for pauses, gaps, noise")
    parser.add_argument(
        "--heldout",
        action="store_true",
        help=f"the held-out set: voices {' '.join(HELDOUT_VOICES)}, languages "
        f"{' '.join(HELDOUT_LANGUAGES)} (default out: recordings/demo-heldout)",
    )
    args = parser.parse_args(argv)
    voices, languages = (VOICE_A, VOICE_B), LANGUAGES
    if args.heldout:
        voices, languages = HELDOUT_VOICES, HELDOUT_LANGUAGES
    out = args.out or here / ("demo-heldout" if args.heldout else "demo")
    if shutil.which("espeak-ng") is None:
        print(
            "make_demo.py: espeak-ng is not on PATH; it is needed only to regenerate the demo, "
            "not to use it (apt-get install espeak-ng)",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(here.parent))  # duplexsim.core.emotions, when run from a checkout
    try:
        generate(out, args.seed, voices, languages)
    except (DemoError, OSError, sf.LibsndfileError) as exc:
        print(f"make_demo.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
