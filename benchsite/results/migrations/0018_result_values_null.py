# Result.values is null where it would hold one repetition that is `value`, or none
# (`results.models.stored_values`). Rows stored before keep their arrays, which read the same;
# going back writes the arrays of the null ones.

import benchsite.results.fields
from django.db import migrations

ARRAYS = {  # the repetitions of a null `values`, as each database's column holds them
    "postgresql": "CASE WHEN value IS NULL THEN '{}'::double precision[] ELSE ARRAY[value] END",
    "sqlite": "CASE WHEN value IS NULL THEN '[]' ELSE json_array(value) END",
}


def write_arrays(apps, schema_editor):
    schema_editor.execute(f'UPDATE results_result SET "values" = '
                          f'{ARRAYS[schema_editor.connection.vendor]} WHERE "values" IS NULL')


class Migration(migrations.Migration):

    dependencies = [
        ('results', '0017_compact_result_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='result',
            name='values',
            field=benchsite.results.fields.FloatListField(default=list, help_text='metric.benchmark_values, all repetitions; null: [value] (or [] where value is null)', null=True),
        ),
        migrations.RunPython(migrations.RunPython.noop, write_arrays),
    ]
