//! Well-formed example requests (used by `mosaic demo`, the docs and the
//! tests): a proposal with one declared source whose exact text travels
//! with the request, so the server's built-in verbatim verifier judges it
//! and the real gate can accept it. No judgment is supplied by the
//! proposer.

use std::collections::BTreeMap;

use mosaic_harness::MemoryKind;
use mosaic_harness::MemorySource;
use mosaic_harness::MemorySubject;
use mosaic_harness::canonical::sha256_hex;
use mosaic_harness::memory_write::MemoryPurpose;

use crate::api::ProposeRequest;

/// A proposal of `content` quoting one source (`label` names it) whose
/// exact text is `source_text`: the verbatim verifier supports it iff the
/// content occurs in that text.
pub fn quoted_proposal(
    label: &str,
    content: &str,
    source_text: &str,
    kind: MemoryKind,
    purpose: MemoryPurpose,
    subject: MemorySubject,
    consent_receipt_sha256: Option<String>,
) -> ProposeRequest {
    let source = MemorySource {
        source_id: format!("src-{label}"),
        content_sha256: sha256_hex(source_text.as_bytes()),
        provenance_sha256: sha256_hex(format!("provenance/{label}").as_bytes()),
        locator_sha256: sha256_hex(format!("locator/{label}").as_bytes()),
    };
    ProposeRequest {
        source_texts: BTreeMap::from([(source.source_id.clone(), source_text.to_owned())]),
        sources: vec![source],
        consent_receipt_sha256,
        ..ProposeRequest::new(content, kind, purpose, subject)
    }
}

/// A proposal of `content` whose one source (`label` names it) is a
/// conversation turn that says exactly `content`, so the verbatim verifier
/// supports it.
pub fn supported_proposal(
    label: &str,
    content: &str,
    kind: MemoryKind,
    purpose: MemoryPurpose,
    subject: MemorySubject,
    consent_receipt_sha256: Option<String>,
) -> ProposeRequest {
    quoted_proposal(
        label,
        content,
        content,
        kind,
        purpose,
        subject,
        consent_receipt_sha256,
    )
}

/// Semantic memory about `principal` (personalization, needs consent).
pub fn preference(
    label: &str,
    principal: &str,
    content: &str,
    consent: Option<String>,
) -> ProposeRequest {
    supported_proposal(
        label,
        content,
        MemoryKind::Semantic,
        MemoryPurpose::Personalization,
        MemorySubject::Principal {
            principal_id: principal.to_owned(),
        },
        consent,
    )
}

/// Semantic knowledge about a workspace.
pub fn workspace_fact(label: &str, workspace: &str, content: &str) -> ProposeRequest {
    supported_proposal(
        label,
        content,
        MemoryKind::Semantic,
        MemoryPurpose::WorkspaceKnowledge,
        MemorySubject::Workspace {
            workspace_id: workspace.to_owned(),
        },
        None,
    )
}

/// Pursuits, places, things and dishes for [`distinct_note`]: each list's
/// length is a different prime (31, 37, 41, 43), so the entries of two
/// notes coincide only when their sequence numbers differ by a multiple of
/// that prime. Every entry has at least two words of its own.
const PURSUITS: [&str; 31] = [
    "rock climbing",
    "sourdough baking",
    "competitive chess",
    "watercolour painting",
    "salsa dancing",
    "coastal birdwatching",
    "sea kayaking",
    "wheel pottery",
    "backyard stargazing",
    "furniture woodworking",
    "marathon running",
    "sock knitting",
    "vegetable gardening",
    "film photography",
    "scuba diving",
    "brush calligraphy",
    "urban beekeeping",
    "sabre fencing",
    "paper origami",
    "cross-country skiing",
    "longboard surfing",
    "traditional archery",
    "club juggling",
    "figure skating",
    "trail cycling",
    "jazz piano",
    "dinghy sailing",
    "silk embroidery",
    "doubles tennis",
    "fly fishing",
    "karaoke nights",
];
const PLACES: [&str; 37] = [
    "Lisbon, Portugal",
    "Nairobi, Kenya",
    "Osaka, Japan",
    "Reykjavik, Iceland",
    "Montreal, Canada",
    "Cusco, Peru",
    "Hanoi, Vietnam",
    "Tbilisi, Georgia",
    "Marrakesh, Morocco",
    "Oslo, Norway",
    "Santiago, Chile",
    "Auckland, New Zealand",
    "Krakow, Poland",
    "Havana, Cuba",
    "Seoul, Korea",
    "Dublin, Ireland",
    "Istanbul, Turkey",
    "Oaxaca, Mexico",
    "Cape Town, South Africa",
    "Tallinn, Estonia",
    "Montevideo, Uruguay",
    "Kathmandu, Nepal",
    "Edinburgh, Scotland",
    "Zanzibar, Tanzania",
    "Quito, Ecuador",
    "Athens, Greece",
    "Ljubljana, Slovenia",
    "Hobart, Tasmania",
    "Jaipur, India",
    "Cartagena, Colombia",
    "Helsinki, Finland",
    "Bruges, Belgium",
    "Chiang Mai, Thailand",
    "Salzburg, Austria",
    "Addis Ababa, Ethiopia",
    "Budapest, Hungary",
    "Valletta, Malta",
];
const THINGS: [&str; 41] = [
    "a cast-iron skillet",
    "a vintage typewriter",
    "noise-cancelling headphones",
    "a mechanical keyboard",
    "a folding bicycle",
    "a brass telescope",
    "a soprano ukulele",
    "waterproof hiking boots",
    "a fountain pen",
    "a camera drone",
    "a bonsai tree",
    "a record player",
    "an e-reader",
    "a standing desk",
    "a chess clock",
    "a sewing machine",
    "a wood-fired pizza oven",
    "a rain jacket",
    "a camping stove",
    "an instant camera",
    "a yoga mat",
    "a student violin",
    "a road atlas",
    "an espresso grinder",
    "a canvas hammock",
    "a pocket sketchbook",
    "a school microscope",
    "a wooden metronome",
    "a tandem kayak",
    "a down sleeping bag",
    "a label printer",
    "a pressure cooker",
    "a freestyle snowboard",
    "a soldering iron",
    "a weather radio",
    "a leather tool belt",
    "a lava lamp",
    "a blues harmonica",
    "a compost bin",
    "a pair of binoculars",
    "a desk globe",
];
const DISHES: [&str; 43] = [
    "tonkotsu ramen",
    "tacos al pastor",
    "mushroom risotto",
    "pad thai",
    "lentil soup",
    "salmon sushi",
    "potato pierogi",
    "spicy shakshuka",
    "jollof rice",
    "beef pho",
    "falafel wraps",
    "butter chicken",
    "shrimp ceviche",
    "Hungarian goulash",
    "seafood paella",
    "pork dumplings",
    "aubergine moussaka",
    "stone-pot bibimbap",
    "cheese poutine",
    "injera with berbere stew",
    "clam chowder",
    "pesto gnocchi",
    "chili con carne",
    "tom yum",
    "beetroot borscht",
    "spinach empanadas",
    "katsu curry",
    "pistachio baklava",
    "apple strudel",
    "key lime pie",
    "cinnamon churros",
    "coffee tiramisu",
    "maple pancakes",
    "banana bread",
    "mango sticky rice",
    "fish and chips",
    "summer ratatouille",
    "spanakopita pastries",
    "bao buns",
    "chilled gazpacho",
    "kimchi stew",
    "almond croissants",
    "halloumi salad",
];

/// The sentence shapes of [`distinct_note`] (13 of them, another prime),
/// each with one entry of every list.
fn note_shape(shape: u64, p: &str, pl: &str, t: &str, d: &str) -> String {
    match shape % 13 {
        0 => format!("Took up {p} after a summer in {pl}, packing {t} and living on {d}"),
        1 => format!(
            "Saving up for {t} to get serious about {p} before a long stay in {pl} with plenty of {d}"
        ),
        2 => {
            format!("Orders {d} whenever in {pl}, never travels without {t}, and fits in some {p}")
        }
        3 => format!(
            "Borrowed {t} from a neighbour to try {p}, then cooked {d} the way they do in {pl}"
        ),
        4 => format!(
            "Dreams of retiring to {pl} for mornings of {p}, evenings of {d}, and {t} on the porch"
        ),
        5 => format!(
            "Keeps {t} in the car for {p} trips, stops for {d} on the way home, and plans a drive to {pl}"
        ),
        6 => format!("Wants to visit {pl} next year for the {d} and the {p}, and will bring {t}"),
        7 => format!(
            "Gave up {p} after an injury, now collects {t}, eats {d}, and plans a move to {pl}"
        ),
        8 => format!(
            "Would like {t} as a birthday present, with a dinner of {d} and a weekend of {p} near {pl}"
        ),
        9 => format!(
            "Meets friends for {p} twice a month, then shares {d} and stories about {pl} and {t}"
        ),
        10 => format!(
            "Cannot stand {d}, prefers quiet weekends of {p} with {t}, and never liked {pl}"
        ),
        11 => format!(
            "Left {pl} three years ago and still misses its {p} club, its {d}, and the {t} there"
        ),
        _ => format!(
            "Bought {t} for {p}, and pairs the outings with homemade {d} from a recipe from {pl}"
        ),
    }
}

/// A note about a person's pastimes, the `seq`-th of a deterministic
/// sequence, for load tests that write many memories of one subject: the
/// write guards refuse a near-duplicate of a live memory, so notes that
/// differ only by a counter would mostly be refused under a real embedder.
/// Note `seq` has one of 13 sentence shapes (`seq % 13`) filled with one
/// entry of each of four lists of prime lengths 31, 37, 41 and 43 (`seq`
/// modulo each). Two notes whose numbers differ by less than 1,147
/// (31 x 37) therefore share at most one entry, so each has at least six
/// words the other lacks; after 13 x 31 x 37 x 41 x 43 numbers the
/// sequence repeats.
pub fn distinct_note(seq: u64) -> String {
    let at = |len: usize| (seq % len as u64) as usize;
    note_shape(
        seq,
        PURSUITS[at(PURSUITS.len())],
        PLACES[at(PLACES.len())],
        THINGS[at(THINGS.len())],
        DISHES[at(DISHES.len())],
    )
}

/// A word a [`distinct_note`] may be about, for a recall query: a pursuit
/// or a dish, by `pick`.
pub fn note_topic(pick: u64) -> &'static str {
    let all = PURSUITS.len() + DISHES.len();
    let i = (pick % all as u64) as usize;
    PURSUITS
        .get(i)
        .copied()
        .unwrap_or_else(|| DISHES[i - PURSUITS.len()])
}
