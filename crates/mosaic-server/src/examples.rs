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
/// length is a different prime (31, 37, 41, 43), so the list entries of two
/// notes coincide only when their sequence numbers differ by a multiple of
/// that prime.
const PURSUITS: [&str; 31] = [
    "rock climbing",
    "sourdough baking",
    "chess",
    "watercolour painting",
    "salsa dancing",
    "birdwatching",
    "sea kayaking",
    "pottery",
    "stargazing",
    "woodworking",
    "marathon running",
    "knitting",
    "vegetable gardening",
    "film photography",
    "scuba diving",
    "calligraphy",
    "beekeeping",
    "fencing",
    "origami",
    "cross-country skiing",
    "surfing",
    "archery",
    "juggling",
    "ice skating",
    "trail cycling",
    "jazz piano",
    "sailing",
    "embroidery",
    "tennis",
    "fly fishing",
    "karaoke",
];
const PLACES: [&str; 37] = [
    "Lisbon",
    "Nairobi",
    "Osaka",
    "Reykjavik",
    "Montreal",
    "Cusco",
    "Hanoi",
    "Tbilisi",
    "Marrakesh",
    "Oslo",
    "Santiago",
    "Auckland",
    "Krakow",
    "Havana",
    "Seoul",
    "Dublin",
    "Istanbul",
    "Vancouver",
    "Cape Town",
    "Bergen",
    "Valparaiso",
    "Kyoto",
    "Edinburgh",
    "Zanzibar",
    "Tallinn",
    "Lima",
    "Porto",
    "Ljubljana",
    "Hobart",
    "Jaipur",
    "Cartagena",
    "Helsinki",
    "Bruges",
    "Chiang Mai",
    "Salzburg",
    "Addis Ababa",
    "Quebec City",
];
const THINGS: [&str; 41] = [
    "a cast-iron skillet",
    "a vintage typewriter",
    "noise-cancelling headphones",
    "a mechanical keyboard",
    "a folding bicycle",
    "a brass telescope",
    "a ukulele",
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
    "a film camera",
    "a yoga mat",
    "a violin",
    "a road atlas",
    "an espresso grinder",
    "a hammock",
    "a sketchbook",
    "a microscope",
    "a metronome",
    "a tandem kayak",
    "a sleeping bag",
    "a label printer",
    "a pressure cooker",
    "a snowboard",
    "a soldering iron",
    "a weather radio",
    "a tool belt",
    "a lava lamp",
    "a harmonica",
    "a compost bin",
    "a pair of binoculars",
    "a desk globe",
];
const DISHES: [&str; 43] = [
    "ramen",
    "tacos al pastor",
    "mushroom risotto",
    "pad thai",
    "lentil soup",
    "sushi",
    "pierogi",
    "shakshuka",
    "jollof rice",
    "pho",
    "falafel",
    "butter chicken",
    "ceviche",
    "goulash",
    "paella",
    "dumplings",
    "moussaka",
    "bibimbap",
    "poutine",
    "injera with lentil stew",
    "clam chowder",
    "pesto gnocchi",
    "chili con carne",
    "tom yum",
    "borscht",
    "empanadas",
    "katsu curry",
    "baklava",
    "apple strudel",
    "key lime pie",
    "churros",
    "tiramisu",
    "pancakes with maple syrup",
    "banana bread",
    "mango sticky rice",
    "fish and chips",
    "ratatouille",
    "spanakopita",
    "bao buns",
    "gazpacho",
    "kimchi stew",
    "croissants",
    "halloumi salad",
];

/// The sentence shapes of [`distinct_note`] (13 of them, another prime),
/// each with three of the four kinds of entry.
fn note_shape(shape: u64, p: &str, pl: &str, t: &str, d: &str) -> String {
    match shape % 13 {
        0 => format!("Took up {p} after a summer in {pl}, where {d} was on every menu"),
        1 => format!("Saving up for {t} to take {p} more seriously during a stay in {pl}"),
        2 => format!("Orders {d} whenever in {pl} and never travels without {t}"),
        3 => format!("Borrowed {t} from a neighbour to try {p}, then celebrated with {d}"),
        4 => format!(
            "Dreams of retiring to {pl} to spend the mornings on {p} and the evenings cooking {d}"
        ),
        5 => format!("Keeps {t} in the car for {p} trips and stops for {d} on the way home"),
        6 => format!("Wants to visit {pl} next year, mostly for the {d}, and will bring {t}"),
        7 => format!(
            "Gave up {p} after an injury and now collects {t} while planning a move to {pl}"
        ),
        8 => format!(
            "Would like {t} as a birthday present and a dinner of {d} before flying to {pl}"
        ),
        9 => format!(
            "Meets friends for {p} twice a month, then shares {d} at a place that recalls {pl}"
        ),
        10 => format!("Cannot stand {d} and prefers quiet weekends of {p} with {t} close at hand"),
        11 => format!("Left {pl} three years ago and still misses the {p} club there and its {t}"),
        _ => format!(
            "Bought {t} secondhand, uses it for {p}, and pairs the outings with homemade {d}"
        ),
    }
}

/// A note about a person's pastimes, the `seq`-th of a deterministic
/// sequence, for load tests that write many memories of one subject: the
/// write guards refuse a near-duplicate of a live memory, so notes that
/// differ only by a counter would mostly be refused under a real embedder.
/// Note `seq` has one of 13 sentence shapes (`seq % 13`) filled with three
/// entries of four lists of prime lengths 31, 37, 41 and 43 (`seq` modulo
/// each). Two notes whose numbers differ by less than 1,147 (31 x 37)
/// therefore share at most one entry, and share their shape too only when
/// the numbers differ by a multiple of 13 (so by at least 403 for a shape
/// and an entry); past 1,147 notes they start to share more, and after
/// 13 x 31 x 37 x 41 x 43 the sequence repeats.
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
