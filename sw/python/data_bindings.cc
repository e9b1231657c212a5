// The data side for python/tessera/data, tessera.io and keras.datasets: MNIST-layout IDX files
// and TFRecord image files as numpy arrays, TFRecord records and tf.train.Example messages, the
// bf16 staging of values and the pipeline's shuffle order (the one `tessera train` uses, so a
// fit() over arrays sees the C++ trainer's batches for a seed).
#include <pybind11/stl.h>

#include "sw/python/bindings.h"
#include "sw/data/shuffle.h"
#include "tessera/data.h"
#include "tessera/tfrecord.h"

namespace tessera::python {

void bind_data(py::module_& m) {
  m.def("default_data_dir", &data::default_data_dir);
  // (images uint8 (n, rows, cols), labels uint8 (n,)) of train-* or t10k-* in `dir`.
  m.def("load_mnist", [](const std::string& dir, const std::string& split) {
    if (split != "train" && split != "test")
      throw std::invalid_argument("split '" + split + "': train or test");
    data::Dataset d;
    {
      py::gil_scoped_release release;
      d = data::load_mnist(dir, split == "train" ? data::Split::kTrain : data::Split::kTest);
    }
    const auto n = static_cast<py::ssize_t>(d.count);
    return py::make_tuple(to_array(std::move(d.images), {n, static_cast<py::ssize_t>(d.rows),
                                                         static_cast<py::ssize_t>(d.cols)}),
                          to_array(std::move(d.labels)));
  });
  // float32 values -> bf16 bits (round to nearest even), as the chip's inputs are staged.
  m.def("to_bf16", [](const Array<float>& v) {
    return to_array(data::values_to_bf16(v.data(), static_cast<size_t>(v.size())));
  });

  // The order one epoch visits ids 0..count-1: tf.data's shuffle(buffer, seed) as the C++
  // pipeline draws it (sw/data/shuffle.h), so Python's batches are `tessera train`'s.
  m.def(
      "shuffle_order",
      [](uint32_t count, uint32_t buffer, uint64_t seed, uint64_t epoch) {
        if (buffer == 0) throw std::invalid_argument("shuffle: buffer_size must be at least 1");
        return to_array(data::shuffle_order(count, buffer, seed, epoch));
      },
      py::arg("count"), py::arg("buffer"), py::arg("seed"), py::arg("epoch"));

  // ---- TFRecord files (tessera/tfrecord.h) ----
  // Every record's data (bytes), the framing and both CRCs checked (DataError names the file
  // and the record's offset).
  m.def("read_tfrecords", [](const std::string& path) {
    std::vector<data::TFRecord> recs;
    {
      py::gil_scoped_release release;
      recs = data::read_tfrecords(path);
    }
    py::list out;
    for (const auto& r : recs) out.append(py::make_tuple(py::bytes(r.data), r.offset));
    return out;
  });
  // A tf.train.Example's features: {name: bytes list | int64 array | float32 array}.
  m.def(
      "decode_example",
      [](const py::bytes& b, const std::string& path, uint64_t offset, uint64_t index) {
        const std::string s = b;
        const data::Example e = data::decode_example(s, path, offset, index);
        py::dict out;
        for (const auto& [name, f] : e.features) {
          switch (f.kind) {
            case data::Feature::Kind::kBytes: {
              py::list l;
              for (const auto& v : f.bytes_list) l.append(py::bytes(v));
              out[py::str(name)] = l;
              break;
            }
            case data::Feature::Kind::kFloat:
              out[py::str(name)] = to_array(std::vector<float>(f.float_list));
              break;
            case data::Feature::Kind::kInt64:
              out[py::str(name)] = to_array(std::vector<int64_t>(f.int64_list));
              break;
            case data::Feature::Kind::kNone:
              out[py::str(name)] = py::none();
              break;
          }
        }
        return out;
      },
      py::arg("data"), py::arg("path") = "<example>", py::arg("offset") = 0, py::arg("index") = 0);
  // {name: bytes | list of bytes | int array | float array} -> the Example's bytes.
  m.def("encode_example", [](const py::dict& features) {
    data::Example e;
    for (const auto& [k, v] : features) {
      const std::string name = py::cast<std::string>(k);
      if (py::isinstance<py::bytes>(v)) {
        e.features[name] = data::Feature::bytes({py::cast<std::string>(v)});
      } else if (py::isinstance<py::list>(v) && py::len(v) > 0 &&
                 py::isinstance<py::bytes>(py::cast<py::list>(v)[0])) {
        e.features[name] = data::Feature::bytes(py::cast<std::vector<std::string>>(v));
      } else {
        const py::array a = py::array::ensure(v);
        if (!a) throw std::invalid_argument("feature '" + name + "': bytes, ints or floats");
        if (a.dtype().kind() == 'f')
          e.features[name] = data::Feature::floats(to_vector(Array<float>::ensure(a)));
        else if (a.dtype().kind() == 'i' || a.dtype().kind() == 'u' || a.dtype().kind() == 'b')
          e.features[name] = data::Feature::int64s(to_vector(Array<int64_t>::ensure(a)));
        else
          throw std::invalid_argument("feature '" + name + "': bytes, ints or floats");
      }
    }
    return py::bytes(data::encode_example(e));
  });
  py::class_<data::TFRecordWriter>(m, "TFRecordWriter")
      .def(py::init<const std::string&>(), py::arg("path"))
      .def("write", [](data::TFRecordWriter& w, const py::bytes& b) { w.write(b); })
      .def("close", &data::TFRecordWriter::close)
      .def_property_readonly("records", &data::TFRecordWriter::records)
      .def_property_readonly("path", &data::TFRecordWriter::path);
  // (images uint8 (n, rows, cols), labels uint8 (n,)) from image Example files, in order.
  m.def(
      "load_tfrecord_images",
      [](const std::vector<std::string>& paths, const std::string& image_key,
         const std::string& label_key) {
        data::Dataset d;
        {
          py::gil_scoped_release release;
          d = data::load_tfrecord_images(paths, image_key, label_key);
        }
        const auto n = static_cast<py::ssize_t>(d.count);
        return py::make_tuple(to_array(std::move(d.images), {n, static_cast<py::ssize_t>(d.rows),
                                                             static_cast<py::ssize_t>(d.cols)}),
                              to_array(std::move(d.labels)));
      },
      py::arg("paths"), py::arg("image_key") = "image", py::arg("label_key") = "label");
  m.def(
      "write_tfrecord_images",
      [](const Array<uint8_t>& images, const Array<int64_t>& labels, const std::string& path,
         uint32_t shards) {
        if (images.ndim() != 3)
          throw std::invalid_argument("images: (n, rows, cols) uint8 pixels");
        data::Dataset d;
        d.count = static_cast<uint32_t>(images.shape(0));
        d.rows = static_cast<uint32_t>(images.shape(1));
        d.cols = static_cast<uint32_t>(images.shape(2));
        if (static_cast<size_t>(labels.size()) != d.count)
          throw std::invalid_argument("images and labels: " + std::to_string(d.count) +
                                      " images, " + std::to_string(labels.size()) + " labels");
        d.images = to_vector(images);
        d.labels.resize(d.count);
        for (size_t i = 0; i < d.count; ++i) {
          const int64_t l = labels.data()[i];
          if (l < 0 || l > 255)
            throw std::invalid_argument("labels[" + std::to_string(i) + "] = " + std::to_string(l) +
                                        ": class indices 0..255");
          d.labels[i] = static_cast<uint8_t>(l);
        }
        py::gil_scoped_release release;
        data::write_tfrecord_images(d, path, shards);
      },
      py::arg("images"), py::arg("labels"), py::arg("path"), py::arg("shards") = 1);
  m.def("tfrecord_shard_path", &data::tfrecord_shard_path);
}

}  // namespace tessera::python
