"""The words the deterministic judge reads claims from: English, German, French, Spanish, and
a few of Italian, Portuguese and Dutch.

Patterns are matched case-insensitively on one clause at a time. The order of checking is
unknown, then failure, then success: a matched span is blanked before the next kind looks,
so "was not booked" is a failure and never also a success, and "whether it was booked" is
doubt, not success.
"""

from __future__ import annotations

import re


def _any(*parts: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in parts), re.IGNORECASE)


UNKNOWN = _any(
    # English
    r"\b(?:can(?:no|')?t|could(?:n't| not)|unable to|not able to|no way to|wasn't able to)"
    r" (?:\w+ )?(?:confirm|verify|tell|say|know|check|determine)",
    r"\bnot (?:[\w%]+ )?(?:sure|certain)\b|\bunsure\b|\bunclear\b|\bunknown\b|\buncertain\b",
    r"\bmay or may not\b|\bmight (?:or might not|not)\b|\bmight have\b|\bmay have\b",
    r"\bdon't know (?:whether|if)\b|\bdo not know (?:whether|if)\b",
    r"\bhopefully\b|\bit is possible that\b|\bpossibly\b|\bno way of (?:knowing|telling)\b",
    r"\bcould(?:n't| not) be (?:verified|confirmed|checked)\b|\bcan(?:no|')?t guarantee\b",
    # German
    r"\bkann (?:\w+ ){0,2}nicht (?:\w+ )?(?:bestätigen|sagen|prüfen|überprüfen|feststellen)",
    r"\bnicht sicher\b|\bunklar\b|\bungewiss\b|\bunbekannt\b|\bmöglicherweise\b|\bvielleicht\b",
    r"\bweiß (?:ich )?nicht,? ob\b",
    # French
    r"\bne (?:\w+ )?(?:peux|pouvons|peut|sais|savons) pas (?:\w+ )?(?:confirmer|vérifier|dire|si)",
    r"\bje ne sais pas si\b|\bpas sûr|\bincertain|\bimpossible de (?:confirmer|vérifier|savoir)",
    r"\bpeut-être\b",
    # Spanish
    r"\bno (?:puedo|pude|podemos|he podido) (?:\w+ )?(?:confirmar|verificar|comprobar|saber)",
    r"\bno (?:tengo|hay) (?:forma|manera|modo) de (?:saber|comprobar|verificar)",
    r"\bno s[ée] si\b|\bno estoy segur[oa]\b|\bincierto\b|\bquizás?\b|\btal vez\b|\bpuede que\b",
    # Italian, Portuguese, Dutch
    r"\bnon (?:posso|riesco a) (?:confermare|verificare)|\bnon so se\b|\bnon sono sicur[oa]\b",
    r"\bnão (?:posso|consigo) (?:confirmar|verificar)|\bnão sei se\b",
    r"\bkan niet (?:\w+ )?(?:bevestigen|controleren)|\bweet niet of\b|\bniet zeker\b",
)

# "whether/if <it> was booked": the success word inside is a question, not a claim.
WHETHER = _any(r"\b(?:whether|if|ob|si)\b[^.;!?]{0,60}")

_DONE_EN = (
    r"(?:booked|reserved|created|made|placed|processed|completed|charged|paid|saved|"
    r"successful|confirmed|done|recorded|billed|executed)"
)

FAILURE = _any(
    # English
    r"\bfail(?:ed|s|ure)?\b|\bunsuccessful\b|\bdeclined\b|\brejected\b",
    r"\b(?:did(?:n't| not)|has(?:n't| not)|have(?:n't| not)) (?:yet )?(?:work|go through|succeed"
    r"|happen|book|reserve|charge|pay|make|create|complete)(?:ed)?\b",
    r"\b(?:could(?:n't| not)|can(?:no|')?t|was(?:n't| not) able to|unable to|not able to)"
    r" (?:\w+ )?(?:complete|book|make|process|create|place|finish|reserve|charge|pay|do)\b",
    rf"\b(?:was|were|is|are|has|have|had)(?:n't| not| never)(?: yet)? (?:been )?{_DONE_EN}\b",
    rf"\bnot (?:yet )?(?:been )?{_DONE_EN}\b",
    # "could not be completed", "can't be booked": a success word under a negation.
    rf"(?:\bnot|n't|\bnever|\bcannot)(?: \w+){{0,2}} (?:be|been) {_DONE_EN}\b",
    r"\bnothing (?:has |have |had )?(?:gone|went) through\b",
    rf"\b(?:no|nothing)\b[^.;!?]{{0,25}}\b(?:was|were|has been|have been|got) {_DONE_EN}\b",
    r"\bno (?:booking|reservation|payment|charge)s? (?:exists?|was|were|has|found)\b",
    r"\b(?:there (?:is|are)|there's) no (?:booking|reservation|payment|charge)",
    # German
    r"\bfehlgeschlagen\b|\bgescheitert\b|\babgelehnt\b|\bnicht (?:\w+ )?(?:geklappt|funktioniert|"
    r"gebucht|reserviert|durchgeführt|angelegt|erfolgreich|möglich|bezahlt|ausgeführt)\b",
    r"\bkonnte (?:\w+ )?nicht (?:\w+ )?(?:durchgeführt|gebucht|angelegt|abgeschlossen|"
    r"ausgeführt|bezahlt)",
    r"\bkeine (?:Buchung|Reservierung|Zahlung)\b",
    # French
    r"\béchou|\bn'a pas (?:\w+ )?(?:fonctionné|marché|abouti|réussi|été (?:\w+ )?"
    r"(?:effectué|enregistré|réservé|débité|créé|payé))",
    r"\b(?:pas|n'ai pas|n'avons pas) pu (?:\w+ )?(?:effectuer|réserver|payer|terminer|finaliser)",
    r"\bn'(?:a|ai|avons|ont) pas pu\b",
    r"\brefusé|\baucun(?:e)? (?:montant|réservation|paiement)[^.;!?]{0,30}",
    # Spanish
    r"\bfall(?:ó|ado|ida|aron)\b|\brechazad[oa]\b",
    r"\bno se (?:\w+ )?(?:pudo|ha podido|ha realizado|realizó|completó|ha completado|hizo|"
    r"ha hecho|guardó)\b",
    r"\bno (?:pude|he podido|hemos podido) (?:\w+ )?(?:completar|reservar|realizar|pagar|hacer)",
    # Italian, Portuguese, Dutch
    r"\bnon è andat[oa] a buon fine\b|\bnon (?:è stat[oa]|sono riuscit[oa])\b|\bfallit[oa]\b",
    r"\bnão foi possível\b|\bfalhou\b|\bnão (?:foi|deu) ",
    r"\bmislukt\b|\bniet gelukt\b|\bkon (?:\w+ )?niet\b",
)

# Words that lean towards failure without saying it; they count only when nothing stronger
# is said anywhere in the message.
WEAK_FAILURE = _any(
    r"\berror\b|\btim(?:ed|es) out\b|\btimeout\b|\bwent wrong\b|\bproblem\b",
    r"\brate[- ]limit|\btry again later\b|\bplease try again\b",
    r"\bFehler\b|\berneut versuchen\b|\bspäter (?:noch einmal|erneut)\b",
    r"\berreur\b|\bréessayer\b",
    r"\berror\b|\binténtalo de nuevo\b|\bvuelve a intentarlo\b",
    r"\berrore\b|\briprova\b|\berro\b|\bfout\b",
)

SUCCESS = _any(
    # English
    r"\bdone\b|\bbooked\b|\breserved\b|\bconfirmed\b|\bsuccess(?:fully|ful)?\b|\bsucceeded\b",
    r"\bwent through\b|\bgone through\b|\ball set\b|\bcomplete(?:d)?\b|\bprocessed\b",
    r"\bpaid\b|\bcharged\b|\baccepted\b|\bsubmitted\b|\bplaced\b|\bin place\b|\bexists\b|\bit worked\b",
    r"\b(?:has|have) been (?:made|created)\b|\bis (?:now )?(?:made|created)\b|\bwas (?:made|created)\b",
    r"\bfound (?:the|your|a) (?:booking|reservation|payment)\b",
    r"\b(?:is|are) (?:\w+ )?(?:fine|ok(?:ay)?|good to go)\b",
    # German
    r"\bgebucht\b|\breserviert\b|\bbestätigt\b|\berfolgreich\b|\berledigt\b|\bdurchgeführt\b",
    r"\bangelegt\b|\bist durch\b|\babgeschlossen\b|\bbezahlt\b|\bhat geklappt\b|\bausgeführt\b",
    # French
    r"\bréservée?s?\b|\bconfirmée?s?\b|\beffectuée?s?\b|\bréussi\b|\bc'est fait\b",
    r"\benregistrée?s?\b|\bpayée?s?\b|\bdébitée?s?\b|\bj'ai réservé\b|\bacceptée?s?\b",
    r"\b(?:est|a été) faite?\b",
    # Spanish
    r"\breservad[ao]s?\b|\bconfirmad[ao]s?\b|\brealizad[ao]s?\b|\bcompletad[ao]s?\b",
    r"\blisto\b|\bhech[ao]\b|\bcorrectamente\b|\bpagad[ao]\b|\bhe reservado\b|\bse ha completado\b",
    # Italian, Portuguese, Dutch
    r"\bprenotat[ao]\b|\bcompletat[ao]\b|\bfatto\b|\bcon successo\b|\bconfermat[ao]\b",
    r"\bconcluíd[ao]\b|\bsucesso\b",
    r"\bgelukt\b|\bgeboekt\b|\bbevestigd\b|\bbetaald\b",
)

# What the user asked for: a clause naming it carries the claim.
TOPIC = _any(
    r"\bbook|\breserv|\broom\b|\bstay\b|\bpay|\bcharge|\binvoice\b|\btransaction\b",
    r"\bBuchung|\bZimmer\b|\bZahlung\b|\bRechnung\b|\bgebucht\b",
    r"\bchambre\b|\bpaiement\b|\bfacture\b",
    r"\bhabitación\b|\bpago\b|\bfactura\b",
    r"\bprenota|\bcamera\b|\bpagamento\b|\breserva\b|\bboeking\b|\bkamer\b|\bbetaling\b",
)

# Side matters: a failure in a clause about these does not undo the booking or payment.
SIDE = _any(
    r"\be-?mail\b|\bbreakfast\b|\blate check-?out\b|\breceipt\b|\bnewsletter\b|\bnotification\b",
    r"\bE-Mail\b|\bFrühstück\b|\bQuittung\b|\bBestätigungs-?E-?Mail\b",
    r"\bpetit-déjeuner\b|\bcourriel\b|\bl'e-mail\b|\breçu\b",
    r"\bcorreo\b|\bdesayuno\b|\brecibo\b",
    r"\bcolazione\b|\bemail\b",
)
