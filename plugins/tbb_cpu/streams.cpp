// tbb_cpu streams, events and synchronisation. Every stream of a device is the device's one queue
// (or, without queues, nothing at all: work has completed when its call returns). An event is the
// ticket of the last task queued on its device when it was recorded (Note [Device queues]).
// A NULL stream that names no buffer or kernel (event_record, stream_synchronize) is device 0's.
#include "devices.hpp"
#include "members.hpp"

namespace tbbcpu {

namespace {

// A live event's device and ticket (copied: the host may destroy the event while work waits).
rvl_event live_event(const rvl_event* e, const char* what) {
  return state().events.with(e, what, [](const rvl_event& live) { return live; });
}

}  // namespace

rvl_error* stream_create(int32_t device, rvl_stream** out) {
  return rvl::guard([&] {
    device_at(device);
    if (out == nullptr) rvl::invalid("stream_create: output pointer is NULL");
    *out = state().streams.adopt(new rvl_stream{device});
  });
}

rvl_error* stream_destroy(rvl_stream* stream) {
  return rvl::guard([&] {
    int32_t device;
    {
      rvl_stream* st = state().streams.take(stream, "stream_destroy");
      device = st->device;
      delete st;
    }
    Device& d = device_at(device);
    if (d.queue) d.queue->drain();  // an error stays for the device's next synchronising call
  });
}

rvl_error* stream_synchronize(rvl_stream* stream) {
  return rvl::guard([&] {
    const int32_t device = stream_device(stream, -1, "stream_synchronize");
    synchronize_device(device_at(device < 0 ? 0 : device));
  });
}

rvl_error* event_record(rvl_stream* stream, rvl_event** out) {
  return rvl::guard([&] {
    const int32_t device = stream_device(stream, -1, "event_record");
    Device& d = device_at(device < 0 ? 0 : device);
    if (out == nullptr) rvl::invalid("event_record: output pointer is NULL");
    *out = state().events.adopt(new rvl_event{d.index, d.queue ? d.queue->last_ticket() : 0});
  });
}

// Work queued on `stream` after this waits for the event: nothing to do on the event's own
// device (one queue is in order) or when the event's device has no queue; a waiter without a
// queue waits here; else the stream's queue gets a task that waits for the event's ticket on the
// other queue (always an earlier task, so no cycle).
rvl_error* event_wait(rvl_stream* stream, rvl_event* event) {
  return rvl::guard([&] {
    const rvl_event e = live_event(event, "event_wait");
    const int32_t device = stream_device(stream, -1, "event_wait");
    Device& waiter = device_at(device < 0 ? e.device : device);
    Device& marked = device_at(e.device);
    if (&waiter == &marked || !marked.queue) return;  // in order, or the marked work has run
    if (!waiter.queue) {  // the waiter runs on the launching thread (Note [Queues by core count])
      marked.queue->wait(e.ticket);
      return;
    }
    DeviceQueue* q = marked.queue.get();  // queues live until shutdown, which drains them all first
    waiter.queue->push([q, ticket = e.ticket] { q->wait(ticket); });
  });
}

rvl_error* event_synchronize(rvl_event* event) {
  return rvl::guard([&] {
    const rvl_event e = live_event(event, "event_synchronize");
    Device& d = device_at(e.device);
    if (!d.queue) return;
    d.queue->wait(e.ticket);
    d.queue->take_error();
  });
}

rvl_error* event_destroy(rvl_event* event) {
  return rvl::guard([&] {
    delete state().events.take(event, "event_destroy");
  });
}

rvl_error* synchronize(int32_t device) {
  return rvl::guard([&] { synchronize_device(device_at(device)); });
}

}  // namespace tbbcpu
