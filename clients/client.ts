// client.ts: a typed client of Rolodex, from nothing but the server's own OpenAPI document. check.sh
// generates out/schema.d.ts from GET /v1/openapi.json with openapi-typescript; this file must compile
// against it with tsc (strict, no casts), then run against the server: it creates, retrieves, lists
// with expand, patches (with If-Match) and deletes a contact and a business record, creates and
// patches a contact's custom values, and associates a contact with a business record. check.sh defines the contact fields tier (select: gold, silver,
// bronze) and arr (number) first, and fetches the document with the key, so custom is typed by them.
import createClient from "openapi-fetch";
import type { components, paths } from "./out/schema.js";

const baseUrl = process.env.ROLODEX_URL;
const key = process.env.ROLODEX_KEY;
if (!baseUrl || !key) {
  throw new Error("set ROLODEX_URL and ROLODEX_KEY");
}
const api = createClient<paths>({ baseUrl, headers: { "x-api-key": key } });

function check(cond: boolean, what: string): void {
  if (!cond) {
    throw new Error("client check failed: " + what);
  }
  console.log("ok   " + what);
}

// must returns the body of a successful answer, or throws with the problem the server sent.
function must<T>(r: { data?: T; error?: unknown; response: Response }, what: string): T {
  if (r.data === undefined) {
    throw new Error(`${what}: ${r.response.status} ${JSON.stringify(r.error)}`);
  }
  return r.data;
}

function etagOf(response: Response, what: string): string {
  const tag = response.headers.get("ETag");
  check(tag !== null && /^"[0-9]+"$/.test(tag), `${what} has a strong ETag`);
  return tag ?? "";
}

// Contacts.
const orgs = must(await api.GET("/v1/organizations", { params: { query: { limit: 1 } } }), "list organizations");
const orgId = orgs.data[0]?.id ?? null;

// With an Idempotency-Key, a create sent twice (a retry after a timeout, say) makes one contact.
const idempotencyKey = `walk-${Date.now()}-${Math.random()}`;
const newContact = () =>
  api.POST("/v1/contacts", {
    params: { query: { "expand[]": ["organization"] }, header: { "Idempotency-Key": idempotencyKey } },
    body: { name: "Grace", surname: "Hopper", email: "grace@example.com", organizationId: orgId, withSales: true },
  });
const created = await newContact();
const contact = must(created, "create a contact");
const retried = await newContact();
check(
  retried.response.status === 201 && retried.response.headers.get("Idempotent-Replayed") === "true" &&
    retried.data?.id === contact.id,
  "a create retried with its Idempotency-Key answers the same contact, replayed",
);
const id: string = contact.id; // a string of digits, the document says
check(created.response.status === 201 && /^[1-9][0-9]*$/.test(id), "a new contact's id is a string of digits");
check(created.response.headers.get("Location") === `/v1/contacts/${id}`, "Location names the new contact");
check(orgId === null || contact.organization?.id === orgId, "the organization is expanded on create");
const pathID = Number(id);

const got = await api.GET("/v1/contacts/{id}", {
  params: { path: { id: pathID }, query: { "expand[]": ["assignedTo", "userCreator"] } },
});
const fetched = must(got, "retrieve the contact");
check(fetched.name === "Grace" && fetched.surname === "Hopper" && fetched.dni === null, "the contact reads back unchanged");
check(fetched.userCreator?.id === fetched.userCreatorId, "userCreator is expanded");
const tag = etagOf(got.response, "the retrieved contact");

const page = must(
  await api.GET("/v1/contacts", { params: { query: { limit: 100, "expand[]": ["organization", "stage"] } } }),
  "list contacts",
);
check(page.pagination.limit === 100 && page.data.every((c) => c.organization !== undefined), "every listed contact carries the organization expansion");
let walked = page.data.length;
let cursor = page.pagination.nextCursor;
while (cursor !== null) {
  const next = must(await api.GET("/v1/contacts", { params: { query: { limit: 100, cursor } } }), "next page of contacts");
  walked += next.data.length;
  cursor = next.pagination.nextCursor;
}
const count = must(await api.GET("/v1/contacts/count"), "count contacts");
check(walked === count.count, `walking the cursors finds all ${count.count} contacts`);

const patched = await api.PATCH("/v1/contacts/{id}", {
  params: { path: { id: pathID }, header: { "If-Match": tag } },
  body: { jobTitle: "Rear Admiral", surname: null },
});
const updated = must(patched, "patch the contact");
check(updated.jobTitle === "Rear Admiral" && updated.surname === null, "the patch set one field and cleared another");
const tag2 = etagOf(patched.response, "the patched contact");
check(tag2 !== tag, "the patch moved the ETag");

const stale = await api.PATCH("/v1/contacts/{id}", {
  params: { path: { id: pathID }, header: { "If-Match": tag } },
  body: { city: "Arlington" },
});
check(stale.response.status === 412 && stale.error?.code === "precondition_failed", "a stale If-Match is a 412 problem");

const deleted = await api.DELETE("/v1/contacts/{id}", { params: { path: { id: pathID }, header: { "If-Match": tag2 } } });
check(deleted.response.status === 204, "the contact is deleted");
const gone = await api.GET("/v1/contacts/{id}", { params: { path: { id: pathID } } });
check(gone.response.status === 404 && gone.error?.status === 404, "a deleted contact is a 404 problem");

// Business.
const bCreated = await api.POST("/v1/business", {
  params: { query: { "expand[]": ["stage"] } },
  body: { title: "Compiler licence", value: 1234.5, deadline: "2026-12-01T10:00:00+02:00" },
});
const deal = must(bCreated, "create a business record");
const dealID: number = deal.id;
check(bCreated.response.status === 201 && deal.value === 1234.5, "the new deal's value reads back exactly");
check(deal.deadline === "2026-12-01T08:00:00.000Z", "the deadline is returned in UTC with milliseconds");
check(deal.stage?.id === deal.stageId && deal.stage.boardId === deal.boardId, "the default stage is expanded and belongs to the default board");

const bGot = await api.GET("/v1/business/{id}", { params: { path: { id: dealID }, query: { "expand[]": ["userCreator"] } } });
const dealRead = must(bGot, "retrieve the business record");
check(dealRead.title === "Compiler licence" && dealRead.userCreator?.id === dealRead.userCreatorId, "the deal reads back with its creator");
const bTag = etagOf(bGot.response, "the retrieved deal");

const bPage = must(
  await api.GET("/v1/business", { params: { query: { limit: 100, "expand[]": ["organization", "stage", "userCreator"] } } }),
  "list business",
);
check(bPage.data.some((b) => b.id === dealID && b.stage !== undefined), "the list holds the new deal, expanded");

const bPatched = await api.PATCH("/v1/business/{id}", {
  params: { path: { id: dealID }, header: { "If-Match": bTag } },
  body: { value: 0.1, statusId: 3, reasonLost: "Budget" },
});
const lost = must(bPatched, "patch the business record");
check(lost.value === 0.1 && lost.statusId === 3 && lost.reasonLost === "Budget", "the patch set value 0.1 exactly, the status and the reason");
const bTag2 = etagOf(bPatched.response, "the patched deal");

// Activities: a call about the deal, read back with its targets embedded.
const aCreated = await api.POST("/v1/activities", {
  params: { query: { "expand[]": ["targets"] } },
  body: { type: "call", subject: "Licence call", durationSeconds: 600, targets: [{ object: "business", id: dealID }] },
});
const call = must(aCreated, "create an activity");
check(call.targets.length === 1 && call.targets[0]?.id === dealID && call.targets[0]?.data !== undefined, "the call targets the deal, expanded");
const aPage = must(await api.GET("/v1/activities", { params: { query: { target: `business:${dealID}`, done: false, sort: "-occurredAt" } } }), "list the deal's activities");
check(aPage.data.some((a) => a.id === call.id), "the deal's open activities hold the call");
const aDone = must(await api.PATCH("/v1/activities/{id}", { params: { path: { id: call.id } }, body: { doneAt: "2026-12-01T10:00:00Z", targets: [] } }), "patch the activity");
check(aDone.doneAt === "2026-12-01T10:00:00.000Z" && aDone.targets.length === 0, "the call is done and has no targets left");
const aDeleted = await api.DELETE("/v1/activities/{id}", { params: { path: { id: call.id } } });
check(aDeleted.response.status === 204, "the activity is deleted");

const bDeleted = await api.DELETE("/v1/business/{id}", { params: { path: { id: dealID }, header: { "If-Match": bTag2 } } });
check(bDeleted.response.status === 204, "the business record is deleted");
const bGone = await api.DELETE("/v1/business/{id}", { params: { path: { id: dealID } } });
check(bGone.response.status === 404, "a second delete is a 404");
// Custom fields: the generated types know the company's own fields. Equal<A, B> is true only when
// A and B are the same type, so these lines compile only if tier is the union of its options and
// arr a number (each or null when unset), not a string or an open map.
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
type ContactCustom = components["schemas"]["Contact"]["custom"];
const tierIsTheOptions: Equal<ContactCustom["tier"], "gold" | "silver" | "bronze" | null> = true;
const arrIsANumber: Equal<ContactCustom["arr"], number | null> = true;
check(tierIsTheOptions && arrIsANumber, "custom.tier is typed by its options and custom.arr is a number");

const withCustom = await api.POST("/v1/contacts", {
  body: { name: "Ada", surname: "Lovelace", custom: { tier: "gold", arr: 1200.5 } },
});
const ada = must(withCustom, "create a contact with custom values");
const tier: "gold" | "silver" | "bronze" | null = ada.custom.tier;
const arr: number | null = ada.custom.arr;
check(withCustom.response.status === 201 && tier === "gold" && arr === 1200.5, "the custom values read back, typed");
const adaID = Number(ada.id);

const upgraded = must(
  await api.PATCH("/v1/contacts/{id}", { params: { path: { id: adaID } }, body: { custom: { tier: "silver" } } }),
  "patch a custom value",
);
check(upgraded.custom.tier === "silver" && upgraded.custom.arr === 1200.5, "a custom patch changes tier and leaves arr");
// The lists take the company's custom filters and sorts, typed: "custom.tier": "platinum" would not compile.
const silver = must(
  await api.GET("/v1/contacts", { params: { query: { "custom.tier": "silver", "custom.arr[gte]": 1000, sort: "-custom.arr" } } }),
  "list contacts by a custom filter, sorted by a custom field",
);
check(silver.data.length === 1 && Number(silver.data[0]?.id) === adaID, "the custom filter and sort find exactly the contact");
const adaGone = await api.DELETE("/v1/contacts/{id}", { params: { path: { id: adaID } } });
check(adaGone.response.status === 204, "the contact with custom values is deleted");

// Associations: a deal's contacts, each in a role, typed by the document: an end's id is a string for
// a contact and a number for the others, and a list's object is the associated kind's.
const deal2 = must(await api.POST("/v1/business", { body: { title: "Typed association" } }), "create a deal to associate");
const person = must(await api.POST("/v1/contacts", { body: { name: "Katherine", surname: "Johnson" } }), "create a contact to associate");
const personID = Number(person.id);
const put = await api.PUT("/v1/business/{id}/associations/{toKind}/{toId}", {
  params: { path: { id: deal2.id, toKind: "contacts", toId: personID } },
  body: { label: "champion" },
});
const association = must(put, "associate the deal with the contact");
const to = association.to;
const toID: string = to.object === "contact" ? to.id : "";
check(
  put.response.status === 201 && association.from.object === "business" && association.from.id === deal2.id && toID === person.id &&
    association.label === "champion",
  "a PUT makes the association, seen from the deal, the contact's id a string",
);
const champions = must(
  await api.GET("/v1/business/{id}/associations/{toKind}", {
    params: { path: { id: deal2.id, toKind: "contacts" }, query: { label: "champion", "expand[]": ["organization"] } },
  }),
  "list the deal's champions",
);
const champion = champions.data[0]?.object;
check(
  champions.data.length === 1 && champion !== undefined && "surname" in champion && champion.surname === "Johnson",
  "the deal's champion is listed with the whole contact",
);
const dealsOf = must(
  await api.GET("/v1/contacts/{id}/associations/{toKind}/count", { params: { path: { id: personID, toKind: "business" } } }),
  "count the contact's deals",
);
const championsOf = must(
  await api.GET("/v1/contacts", { params: { query: { "associated.business": deal2.id, associatedLabel: "champion" } } }),
  "list the deal's champions by the associated filter",
);
check(dealsOf.count === 1 && championsOf.data.length === 1 && championsOf.data[0]?.id === person.id, "the count and the associated filter find it from the other end");
const removed = must(
  await api.POST("/v1/associations/batch/{op}", {
    params: { path: { op: "delete" } },
    body: { atomic: true, items: [{ from: { object: "contact", id: person.id }, to: { object: "business", id: deal2.id }, label: "champion" }] },
  }),
  "remove the association in a batch",
);
check(removed.data[0]?.status === "deleted" && removed.data[0].object === undefined, "a batch removes it, from either end");
await api.DELETE("/v1/business/{id}", { params: { path: { id: deal2.id } } });
await api.DELETE("/v1/contacts/{id}", { params: { path: { id: personID } } });
console.log("client: all checks passed");
