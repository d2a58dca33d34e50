// Compiled by `tsc -p tsconfig.json` (never run): the declared types
// accept the README's usage and reject a wrong one.
import { Mosaic, MosaicError, NotFoundError, type RecallResponse, type WriteResponse } from "../index.js";

async function usage(): Promise<void> {
  const m = new Mosaic({ apiKey: "mk_x", baseUrl: "http://127.0.0.1:7070", importChunkLines: 50, importChunkBytes: 8192 });
  const ingest = await m.addMessages("chat-1", [{ id: "m1", role: "user", content: "I moved to Berlin." }, "plain text"]);
  const recordId: string = ingest.messages[0].record_id;
  const fact: WriteResponse = await m.addFact("I moved to Berlin", [["chat-1", "m1"]], { ttlMs: 60_000 });
  const accepted: boolean = fact.decision === "accepted";
  const hits: RecallResponse = await m.search("where does the user live", { kinds: ["semantic"], maxRecords: 5 });
  const first: string | undefined = hits.selected_record_ids[0];
  const deletion = await m.delete(recordId);
  if (deletion.deletion_receipt) {
    const ok: boolean = (await m.verify(deletion.deletion_receipt)).valid;
    void ok;
  }
  const backup: string = await m.export();
  const restored = await m.importMemories(backup.split("\n"), { userId: "app1:ann" });
  const replayed: number = restored.replayed;
  const outcome: "accepted" | "rejected" | "replayed" | "error" = restored.results[0].outcome;
  // @ts-expect-error: an import takes text or lines, not parsed objects
  await m.importMemories([{ type: "memory" }]);
  const erasure = await m.deleteAll();
  const complete: boolean = erasure.complete;
  try {
    await m.get("x");
  } catch (e) {
    if (e instanceof NotFoundError || e instanceof MosaicError) {
      const code: string = e.code;
      void code;
    }
  }
  // @ts-expect-error: a role outside the four is a type error
  await m.addMessages("chat-1", [{ role: "robot", content: "x" }]);
  // @ts-expect-error: cites are pairs or objects, not bare ids
  await m.addFact("x", ["m1"]);
  void accepted, first, complete, replayed, outcome;
}
void usage;
